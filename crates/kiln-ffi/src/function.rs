//! `ffi.Function` (seed 002's PackedFunc): a callable object with the safe-call convention
//! `int (*)(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result)`.
//!
//! A Function wraps a Rust closure, a C callback (`TVMFFIFunctionCreate`) or a function object
//! made by another runtime. Calls between Rust closures skip the C convention entirely.

use crate::abi::{type_index, RawAny, SafeCall};
use crate::any::{Any, AnyView, TryFromAny};
use crate::error::{error_from_panic, ffi_guard, set_raised, take_raised, Error, Result};
use crate::object::{ObjectRef, ObjectType};
use std::ffi::c_void;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// ABI cell of a function object.
#[repr(C)]
pub struct FunctionObj {
    /// The entry point: `(self, args, num_args, result) -> 0 or -1` with the error raised.
    pub safe_call: SafeCall,
    /// Unused by Kiln (TVM-FFI keeps a C++ entry here); NULL in Kiln's functions.
    pub cpp_call: *mut c_void,
}

// SAFETY: a function object may be called from any thread (TVM-FFI's contract for functions, which
// Kiln's own closures meet by being Send + Sync).
unsafe impl Send for FunctionObj {}
// SAFETY: as for Send.
unsafe impl Sync for FunctionObj {}

// SAFETY: #[repr(C)] with the layout of TVM-FFI's function cell for ffi.Function.
unsafe impl ObjectType for FunctionObj {
    const TYPE_KEY: &'static str = "ffi.Function";
    fn type_index() -> i32 {
        type_index::FUNCTION
    }
}

/// The body of a Rust function: borrowed arguments in, an owned value or an error out.
pub type PackedFn = dyn Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync;

/// The packed body of a function registered with
/// [`register_global_packed!`](crate::register_global_packed).
pub type StaticPackedFn = fn(&[AnyView<'_>]) -> Result<Any>;

/// The body of a typed function registered with [`register_global!`](crate::register_global):
/// [`TypedFn::call_packed`] of that one function, given its name.
pub type StaticTypedFn = fn(&str, &[AnyView<'_>]) -> Result<Any>;

/// What a Rust function object runs.
///
/// Functions registered at start-up are plain function pointers rather than boxed closures: one
/// constructor and no closure type, vtable or shims per registered function (a few hundred
/// bytes each in the deployable library), and no extra indirection when called.
enum Body {
    Closure(Box<PackedFn>),
    StaticPacked(StaticPackedFn),
    StaticTyped(&'static str, StaticTypedFn),
}

impl Body {
    #[inline]
    fn call(&self, args: &[AnyView<'_>]) -> Result<Any> {
        match self {
            Body::Closure(f) => f(args),
            Body::StaticPacked(f) => f(args),
            Body::StaticTyped(name, f) => f(name, args),
        }
    }
}

/// A function object whose body is Rust code.
#[repr(C)]
struct RustFunction {
    cell: FunctionObj,
    body: Body,
}

/// A function object made from a C callback and its context.
#[repr(C)]
struct CFunction {
    cell: FunctionObj,
    context: *mut c_void,
    call: SafeCall,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

// SAFETY: the C creator hands over a context its call and deleter may use from any thread, as
// TVMFFIFunctionCreate requires.
unsafe impl Send for CFunction {}
// SAFETY: as for Send.
unsafe impl Sync for CFunction {}

impl Drop for CFunction {
    fn drop(&mut self) {
        if let Some(d) = self.deleter {
            // SAFETY: the creator handed us the context together with its deleter.
            unsafe { d(self.context) }
        }
    }
}

unsafe extern "C" fn rust_function_call(
    handle: *mut c_void,
    args: *const RawAny,
    n: i32,
    result: *mut RawAny,
) -> i32 {
    // SAFETY: this entry is only installed on RustFunction objects; the caller passes `n` live
    // arguments and a result slot.
    let (f, args) = unsafe {
        (
            &*((handle as *const u8).add(24) as *const RustFunction),
            AnyView::slice_from_raw(args, n),
        )
    };
    ffi_guard(|| {
        let out = f.body.call(args)?;
        // SAFETY: the caller passes a writable result slot.
        unsafe { *result = out.into_raw() };
        Ok(())
    })
}

unsafe extern "C" fn c_function_call(
    handle: *mut c_void,
    args: *const RawAny,
    n: i32,
    result: *mut RawAny,
) -> i32 {
    // SAFETY: this entry is only installed on CFunction objects.
    unsafe {
        let f = &*((handle as *const u8).add(24) as *const CFunction);
        (f.call)(f.context, args, n, result)
    }
}

/// A reference to a function object.
#[derive(Clone, crate::ObjectRef)]
pub struct Function(pub ObjectRef<FunctionObj>);

impl Function {
    /// Wraps a closure that takes packed arguments.
    pub fn from_packed<F>(f: F) -> Function
    where
        F: Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync + 'static,
    {
        Function::from_body(Body::Closure(Box::new(f)))
    }

    /// What [`register_global_packed!`](crate::register_global_packed) registers.
    #[doc(hidden)]
    pub fn from_static_packed(f: StaticPackedFn) -> Function {
        Function::from_body(Body::StaticPacked(f))
    }

    /// What [`register_global!`](crate::register_global) registers: `f` is the checked call of
    /// one typed function (see [`TypedFn::call_packed`]), `name` appears in argument errors.
    #[doc(hidden)]
    pub fn from_static_typed(name: &'static str, f: StaticTypedFn) -> Function {
        Function::from_body(Body::StaticTyped(name, f))
    }

    /// The non-generic part of the constructors, shared by every closure type.
    #[inline(never)]
    fn from_body(body: Body) -> Function {
        let obj = RustFunction {
            cell: FunctionObj {
                safe_call: rust_function_call,
                cpp_call: std::ptr::null_mut(),
            },
            body,
        };
        Function(ObjectRef::new_with_index(type_index::FUNCTION, obj))
    }

    /// Wraps a typed Rust closure; `name` appears in argument errors.
    pub fn from_typed_named<Args, F: TypedFn<Args>>(name: &str, f: F) -> Function {
        let name = name.to_string();
        Function::from_packed(move |args| f.call_packed(&name, args))
    }

    /// Wraps a typed Rust closure: `Function::from_typed(|a: i64, b: i64| a + b)`.
    pub fn from_typed<Args, F: TypedFn<Args>>(f: F) -> Function {
        Function::from_typed_named("<anonymous>", f)
    }

    /// Wraps a C callback: `call(context, ...)` runs on each call and `deleter(context)` once
    /// when the function object is freed.
    ///
    /// # Safety
    /// `call` must follow the safe-call convention, and `context` must stay valid until
    /// `deleter` runs.
    pub unsafe fn from_c(
        context: *mut c_void,
        call: SafeCall,
        deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    ) -> Function {
        let obj = CFunction {
            cell: FunctionObj {
                safe_call: c_function_call,
                cpp_call: std::ptr::null_mut(),
            },
            context,
            call,
            deleter,
        };
        Function(ObjectRef::new_with_index(type_index::FUNCTION, obj))
    }

    /// `inner` keeping `owner` alive for as long as the returned function lives (TVM's
    /// functions hold the module they came from). A call goes straight to `inner`'s entry
    /// point, arguments and result untouched.
    pub fn with_owner<T: Send + Sync + 'static>(inner: Function, owner: T) -> Function {
        struct Owned<T> {
            inner: Function,
            _owner: T,
        }
        unsafe extern "C" fn call<T>(
            ctx: *mut c_void,
            args: *const RawAny,
            n: i32,
            result: *mut RawAny,
        ) -> i32 {
            // SAFETY: `ctx` is the Owned<T> made below, alive until the deleter runs; the
            // inner function follows the safe-call convention with its own handle.
            unsafe {
                let o = &*(ctx as *const Owned<T>);
                let cell: &FunctionObj = &o.inner.0;
                (cell.safe_call)(o.inner.0.as_ptr().as_ptr() as *mut c_void, args, n, result)
            }
        }
        unsafe extern "C" fn drop_owned<T>(ctx: *mut c_void) {
            // SAFETY: `ctx` came from Box::into_raw below and is freed once, here.
            drop(unsafe { Box::from_raw(ctx as *mut Owned<T>) });
        }
        let ctx = Box::into_raw(Box::new(Owned {
            inner,
            _owner: owner,
        }));
        // SAFETY: the trampoline follows the safe-call convention; the deleter frees `ctx`.
        unsafe { Function::from_c(ctx as *mut c_void, call::<T>, Some(drop_owned::<T>)) }
    }

    /// Calls with packed arguments.
    #[inline]
    pub fn call(&self, args: &[AnyView<'_>]) -> Result<Any> {
        let cell: &FunctionObj = &self.0;
        if cell.safe_call as usize == rust_function_call as SafeCall as usize {
            // Rust to Rust: call the closure directly, catching panics as the C path would.
            // SAFETY: the entry point identifies a RustFunction.
            let f = unsafe { &*(self.0.payload_ptr() as *const RustFunction) };
            return match catch_unwind(AssertUnwindSafe(|| f.body.call(args))) {
                Ok(r) => r,
                Err(p) => Err(error_from_panic(p)),
            };
        }
        let mut result = RawAny::NONE;
        // SAFETY: the object follows the safe-call convention; args are live for the call.
        let rc = unsafe {
            (cell.safe_call)(
                self.0.as_ptr().as_ptr() as *mut c_void,
                args.as_ptr() as *const RawAny,
                args.len() as i32,
                &mut result,
            )
        };
        if rc == 0 {
            // SAFETY: on success the callee wrote an owned value.
            Ok(unsafe { Any::from_raw(result) })
        } else {
            Err(take_raised("function call"))
        }
    }

    /// Calls with owned arguments.
    #[inline]
    pub fn call_any(&self, args: &[Any]) -> Result<Any> {
        // SAFETY: Any and AnyView are both transparent over RawAny; the views borrow `args`.
        let views =
            unsafe { std::slice::from_raw_parts(args.as_ptr() as *const AnyView<'_>, args.len()) };
        self.call(views)
    }

    /// Calls with typed arguments and converts the result: `f.invoke::<i64>((1i64, 2i64))`.
    #[inline]
    pub fn invoke<R: TryFromAny>(&self, args: impl IntoArgs) -> Result<R> {
        let out = args.with_args(|a| self.call(a))?;
        out.try_as::<R>()
    }

    /// A typed view of this function: `let add = f.typed::<(i64, i64), i64>(); add.call((1, 2))`.
    pub fn typed<Args: IntoArgs, R: TryFromAny>(self) -> TypedFunction<Args, R> {
        TypedFunction {
            f: self,
            _marker: std::marker::PhantomData,
        }
    }
}

impl fmt::Debug for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Function@{:p}", self.0.as_ptr())
    }
}

/// A Function called with a fixed Rust signature.
pub struct TypedFunction<Args, R> {
    f: Function,
    _marker: std::marker::PhantomData<fn(Args) -> R>,
}

impl<Args: IntoArgs, R: TryFromAny> TypedFunction<Args, R> {
    /// Calls the function.
    #[inline]
    pub fn call(&self, args: Args) -> Result<R> {
        self.f.invoke(args)
    }

    /// The untyped function.
    pub fn function(&self) -> &Function {
        &self.f
    }
}

/// Argument tuples that can be packed for a call.
pub trait IntoArgs {
    /// Packs the arguments and runs `f` on them.
    fn with_args<R>(self, f: impl FnOnce(&[AnyView<'_>]) -> R) -> R;
}

/// A result that a typed Rust function can return: a value or `Result` of one.
pub trait IntoFnResult {
    /// Converts into the packed result.
    fn into_fn_result(self) -> Result<Any>;
}

impl<T: Into<Any>> IntoFnResult for T {
    #[inline]
    fn into_fn_result(self) -> Result<Any> {
        Ok(self.into())
    }
}

impl<T: Into<Any>> IntoFnResult for Result<T> {
    #[inline]
    fn into_fn_result(self) -> Result<Any> {
        self.map(Into::into)
    }
}

/// A Rust closure with typed arguments that can serve as a Function body.
pub trait TypedFn<Args>: Send + Sync + 'static {
    /// Checks the arguments, converts them, calls the closure.
    fn call_packed(&self, name: &str, args: &[AnyView<'_>]) -> Result<Any>;
}

fn signature(name: &str, arg_types: &[String]) -> String {
    let args: Vec<String> = arg_types
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{i}: {t}"))
        .collect();
    format!("{name}({})", args.join(", "))
}

/// The error for a wrong number of arguments.
pub fn arity_error(name: &str, arg_types: &[String], got: usize) -> Error {
    Error::type_error(format!(
        "Mismatched number of arguments when calling: `{}`. Expected {} but got {} arguments",
        signature(name, arg_types),
        arg_types.len(),
        got
    ))
}

/// The error for an argument of the wrong type.
pub fn arg_type_error(name: &str, arg_types: &[String], index: usize, got: &AnyView<'_>) -> Error {
    Error::type_error(format!(
        "Mismatched type on argument #{index} when calling: `{}`. Expected `{}` but got `{}`",
        signature(name, arg_types),
        arg_types[index],
        got.type_name()
    ))
}

/// Names of a typed function's argument types, as functions, so that the error paths below are
/// shared by every signature instead of being generated for each.
type TypeNames<'a> = &'a [fn() -> String];

/// [`arity_error`] for a typed function (out of line: one copy for all signatures).
#[cold]
#[inline(never)]
fn typed_arity_error(name: &str, types: TypeNames<'_>, got: usize) -> Error {
    let types: Vec<String> = types.iter().map(|f| f()).collect();
    arity_error(name, &types, got)
}

/// [`arg_type_error`] for a typed function (out of line: one copy for all signatures).
#[cold]
#[inline(never)]
fn typed_arg_type_error(
    name: &str,
    types: TypeNames<'_>,
    index: usize,
    args: &[AnyView<'_>],
) -> Error {
    let types: Vec<String> = types.iter().map(|f| f()).collect();
    arg_type_error(name, &types, index, &args[index])
}

macro_rules! impl_typed_fn {
    ($n:expr; $($arg:ident $idx:tt),*) => {
        impl<Func, Ret, $($arg),*> TypedFn<($($arg,)*)> for Func
        where
            Func: Fn($($arg),*) -> Ret + Send + Sync + 'static,
            Ret: IntoFnResult,
            $($arg: TryFromAny,)*
        {
            #[inline]
            #[allow(unused_variables)]
            fn call_packed(&self, name: &str, args: &[AnyView<'_>]) -> Result<Any> {
                let types: [fn() -> String; $n] = [$(<$arg as TryFromAny>::type_name),*];
                if args.len() != $n {
                    return Err(typed_arity_error(name, &types, args.len()));
                }
                $(
                    #[allow(non_snake_case)]
                    let $arg = match <$arg as TryFromAny>::try_from_view(&args[$idx]) {
                        Some(v) => v,
                        None => return Err(typed_arg_type_error(name, &types, $idx, args)),
                    };
                )*
                (self)($($arg),*).into_fn_result()
            }
        }

        impl<$($arg: Into<Any>),*> IntoArgs for ($($arg,)*) {
            #[inline]
            #[allow(unused_variables, non_snake_case)]
            fn with_args<R>(self, f: impl FnOnce(&[AnyView<'_>]) -> R) -> R {
                let ($($arg,)*) = self;
                let owned: [Any; $n] = [$($arg.into()),*];
                // SAFETY: Any and AnyView are both transparent over RawAny.
                let views = unsafe { std::slice::from_raw_parts(owned.as_ptr() as *const AnyView<'_>, $n) };
                f(views)
            }
        }
    };
}

impl_typed_fn!(0;);
impl_typed_fn!(1; A0 0);
impl_typed_fn!(2; A0 0, A1 1);
impl_typed_fn!(3; A0 0, A1 1, A2 2);
impl_typed_fn!(4; A0 0, A1 1, A2 2, A3 3);
impl_typed_fn!(5; A0 0, A1 1, A2 2, A3 3, A4 4);
impl_typed_fn!(6; A0 0, A1 1, A2 2, A3 3, A4 4, A5 5);
impl_typed_fn!(7; A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6);
impl_typed_fn!(8; A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6, A7 7);

/// Calls a Function with any argument values: `call!(f, 1i64, "x")?`.
#[macro_export]
macro_rules! call {
    ($f:expr $(, $arg:expr)* $(,)?) => {
        $f.call_any(&[$($crate::Any::from($arg)),*])
    };
}

/// Sets the raised error and returns -1: for hand-written safe-call entry points.
pub fn raise(err: Error) -> i32 {
    set_raised(err);
    -1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_function_checks_arity_and_types() {
        let add = Function::from_typed_named("add", |a: i64, b: i64| a + b);
        assert_eq!(add.invoke::<i64>((2i64, 3i64)).unwrap(), 5);
        let e = add.invoke::<i64>((1i64,)).unwrap_err();
        assert_eq!(e.kind(), "TypeError");
        assert!(
            e.message().contains("Expected 2 but got 1"),
            "{}",
            e.message()
        );
        let e = add.invoke::<i64>((1i64, "x")).unwrap_err();
        assert!(e.message().contains("argument #1"), "{}", e.message());
        assert!(
            e.message().contains("`add(0: int, 1: int)`"),
            "{}",
            e.message()
        );
        assert!(
            e.message().contains("Expected `int` but got `str`"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn result_errors_and_panics_come_back_as_errors() {
        let f = Function::from_typed(|x: i64| -> Result<i64> {
            if x < 0 {
                Err(Error::value_error("negative"))
            } else {
                Ok(x)
            }
        });
        assert_eq!(f.invoke::<i64>((-1i64,)).unwrap_err().kind(), "ValueError");
        let p = Function::from_typed(|| -> i64 { panic!("boom") });
        let e = p.invoke::<i64>(()).unwrap_err();
        assert_eq!(e.kind(), "InternalError");
        assert!(e.message().contains("boom"));
    }

    #[test]
    fn typed_view_calls() {
        let f = Function::from_typed(|s: String| s.len() as i64);
        let g = f.typed::<(&str,), i64>();
        assert_eq!(g.call(("hello",)).unwrap(), 5);
    }

    #[test]
    fn c_path_matches_rust_path() {
        let f = Function::from_typed(|a: i64| a * 2);
        let args = [Any::from(21i64)];
        let mut out = RawAny::NONE;
        // SAFETY: calling through the C entry with live args.
        let rc = unsafe {
            (f.0.safe_call)(
                f.0.as_ptr().as_ptr() as *mut c_void,
                args.as_ptr() as *const RawAny,
                1,
                &mut out,
            )
        };
        assert_eq!(rc, 0);
        // SAFETY: success wrote an owned value.
        assert_eq!(unsafe { Any::from_raw(out) }.try_as::<i64>().unwrap(), 42);
    }
}
