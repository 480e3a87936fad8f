//! The global function registry (seed 002's `TVM_REGISTER_GLOBAL`): functions by name, shared
//! by Rust, C and Python.
//!
//! Rust code registers at start-up with [`register_global!`](crate::register_global): the entry
//! is collected at link time and inserted the first time the registry is used.

use crate::error::{Error, Result};
use crate::function::Function;
use crate::sync::RecoverPoison;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

/// A function registered at start-up (see [`register_global!`](crate::register_global)).
pub struct GlobalRegistration {
    /// The global name the function is registered under.
    pub name: &'static str,
    /// Makes the function object, when the registry is first read.
    pub make: fn() -> Function,
}

inventory::collect!(GlobalRegistration);

fn table() -> &'static RwLock<HashMap<String, Function>> {
    static TABLE: OnceLock<RwLock<HashMap<String, Function>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut map = HashMap::new();
        for reg in inventory::iter::<GlobalRegistration> {
            if map.insert(reg.name.to_string(), (reg.make)()).is_some() {
                // Two start-up registrations of one name is a bug in Kiln itself.
                panic!(
                    "global function `{}` is registered twice at start-up",
                    reg.name
                );
            }
        }
        RwLock::new(map)
    })
}

/// Registers `f` under `name`. Without `allow_override`, an existing name is an error.
pub fn register(name: &str, f: Function, allow_override: bool) -> Result<()> {
    let mut t = table().write().recover();
    if !allow_override && t.contains_key(name) {
        return Err(Error::runtime_error(format!(
            "Global Function `{name}` is already registered (pass override to replace it)"
        )));
    }
    t.insert(name.to_string(), f);
    Ok(())
}

/// The function registered under `name`.
pub fn get(name: &str) -> Option<Function> {
    table().read().recover().get(name).cloned()
}

/// The function registered under `name`, or an error that names it.
pub fn get_required(name: &str) -> Result<Function> {
    get(name)
        .ok_or_else(|| Error::value_error(format!("global function `{name}` is not registered")))
}

/// Removes a registration; true when it existed.
pub fn remove(name: &str) -> bool {
    table().write().recover().remove(name).is_some()
}

/// Every registered name, sorted.
pub fn names() -> Vec<String> {
    let table = table().read().recover();
    let mut v: Vec<&str> = table.keys().map(String::as_str).collect();
    // Names are distinct, so an unstable sort gives the same order (with less code).
    v.sort_unstable();
    v.into_iter().map(str::to_string).collect()
}

/// Registers a typed Rust function (or closure without captures) under a name at start-up:
///
/// ```ignore
/// kiln_ffi::register_global!("testing.add_one", |x: i64| x + 1);
/// ```
///
/// The function expression goes into a plain `fn` that is called for each call (so it cannot
/// capture anything, and a path or closure literal is what it should be).
#[macro_export]
macro_rules! register_global {
    ($name:expr, $f:expr) => {
        $crate::inventory::submit! {
            $crate::registry::GlobalRegistration {
                name: $name,
                make: || {
                    // A plain function per registration (no closure type): see
                    // `Function::from_static_typed`.
                    fn call(
                        name: &str,
                        args: &[$crate::AnyView<'_>],
                    ) -> $crate::Result<$crate::Any> {
                        $crate::function::TypedFn::call_packed(&$f, name, args)
                    }
                    $crate::Function::from_static_typed($name, call)
                },
            }
        }
    };
}

/// Registers a packed Rust function (`Fn(&[AnyView]) -> Result<Any>`) under a name at start-up.
/// As with [`register_global!`], the function expression goes into a plain `fn`.
#[macro_export]
macro_rules! register_global_packed {
    ($name:expr, $f:expr) => {
        $crate::inventory::submit! {
            $crate::registry::GlobalRegistration {
                name: $name,
                make: || {
                    // A plain function per registration: see `Function::from_static_packed`.
                    fn call(args: &[$crate::AnyView<'_>]) -> $crate::Result<$crate::Any> {
                        ($f)(args)
                    }
                    $crate::Function::from_static_packed(call)
                },
            }
        }
    };
}
