//! SplitHostDevice: each outermost thread-launching region of a function (an `AttrStmt`
//! `thread_extent`, see [`crate::thread_axis`]) becomes a device kernel, and the host calls it
//! through the kernel launch convention (TVM's `SplitHostDevice`).
//!
//! For a function `f`, the `k`-th region (in program order) becomes the function
//! `f_kernel<k>` with:
//!
//! - parameters: the handle variables the region uses without defining (buffer data), those of
//!   `f`'s parameter buffers first in parameter order, then the scalar variables, in order of
//!   first use;
//! - attributes `global_symbol`, `calling_conv = 2` (device kernel launch) and
//!   `tir.kernel_launch_params`: the thread tags of the region, in order of first launch;
//! - the region as its body (with its `thread_extent` attributes).
//!
//! In `f` the region is replaced by `tir.call_packed("f_kernel<k>", params..., extents...)`:
//! the kernel's arguments, then one extent per launch tag. The host function is marked with
//! the device type (`kiln.device_type`), which MakePackedAPI checks the tensors against and
//! LowerTVMBuiltin allocates intermediate buffers on.
//!
//! Errors: host code that still accesses a buffer (a loop not bound to a thread, TVM's
//! VerifyMemory), a kernel with a packed call or a `global` allocation, a tag launched twice
//! with different extents, an extent that depends on a value computed in the kernel.

use super::{Pass, PassContext};
use crate::dtype::DataTypeExt;
use crate::expr::{ExprKind, PrimExpr, Var};
use crate::function::{IRModule, PrimFunc};
use crate::mutator::{mutate_stmt_children, ExprMutator, StmtMutator};
use crate::op::{builtin, call_packed, CALL_PACKED};
use crate::stmt::{Stmt, StmtKind};
use crate::structural::structural_equal;
use crate::thread_axis::{thread_extent_of, ThreadTag};
use crate::visitor::{post_order_visit, undefined_vars, IrRef};
use kiln_ffi::{Any, Array, DataType, Error, Map, Result};
use std::collections::HashSet;

/// The attribute listing a kernel's launch tags (TVM's `tir.kernel_launch_params`).
pub const KERNEL_LAUNCH_PARAMS: &str = "tir.kernel_launch_params";

/// The function attribute giving the DLPack device type a host function's tensors live on.
pub const DEVICE_TYPE_ATTR: &str = "kiln.device_type";

/// `calling_conv` of a device kernel (TVM's `CallingConv::kDeviceKernelLaunch`).
pub const DEVICE_KERNEL_LAUNCH: i64 = 2;

/// The DLPack device type of a host function's tensors: its [`DEVICE_TYPE_ATTR`], else 1
/// (CPU).
pub fn device_type_of(f: &PrimFunc) -> i64 {
    f.get_attr(DEVICE_TYPE_ATTR)
        .and_then(|v| v.try_as::<i64>().ok())
        .unwrap_or(1)
}

/// True for a device kernel made by this pass.
pub fn is_device_kernel(f: &PrimFunc) -> bool {
    f.get_attr("calling_conv")
        .and_then(|v| v.try_as::<i64>().ok())
        == Some(DEVICE_KERNEL_LAUNCH)
}

/// The launch tags of a kernel ([`KERNEL_LAUNCH_PARAMS`]).
pub fn launch_params_of(f: &PrimFunc) -> Vec<String> {
    f.get_attr(KERNEL_LAUNCH_PARAMS)
        .and_then(|v| v.try_as::<Array>().ok())
        .map(|a| a.iter().filter_map(|t| t.try_as::<String>().ok()).collect())
        .unwrap_or_default()
}

/// The SplitHostDevice pass (`tir.SplitHostDevice`, opt level 0) for tensors on DLPack device
/// `device_type` (4: OpenCL, 2: CUDA); `target` names the target in errors.
pub fn split_host_device(device_type: i64, target: &str) -> Pass {
    let target = target.to_string();
    Pass::new(
        "tir.SplitHostDevice",
        0,
        move |m: IRModule, _: &PassContext| {
            let mut funcs = Vec::new();
            for (key, f) in m.functions().iter() {
                if is_device_kernel(f) {
                    funcs.push((key.clone(), f.clone()));
                    continue;
                }
                let name = f.global_symbol().unwrap_or_else(|| key.clone());
                let (host, kernels) = split_function(&name, f, device_type, &target)?;
                funcs.push((key.clone(), host));
                for k in kernels {
                    let kname = k.global_symbol().expect("kernels are named");
                    funcs.push((kname, k));
                }
            }
            IRModule::new(funcs)
        },
    )
}

/// Splits one function into its host part and its kernels (see the module docs).
pub fn split_function(
    name: &str,
    f: &PrimFunc,
    device_type: i64,
    target: &str,
) -> Result<(PrimFunc, Vec<PrimFunc>)> {
    let mut s = Splitter {
        name: name.to_string(),
        func: f.clone(),
        kernels: Vec::new(),
        error: None,
    };
    let body = s.mutate_stmt(f.body());
    if let Some(e) = s.error {
        return Err(e);
    }
    verify_host_memory(name, &body, target)?;
    let host = f.with_body(body).with_attr(DEVICE_TYPE_ATTR, device_type);
    Ok((host, s.kernels))
}

struct Splitter {
    name: String,
    func: PrimFunc,
    kernels: Vec<PrimFunc>,
    error: Option<Error>,
}

impl ExprMutator for Splitter {
    fn mutate_expr(&mut self, e: &PrimExpr) -> PrimExpr {
        e.clone()
    }
}

impl StmtMutator for Splitter {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        if let StmtKind::AttrStmt(a) = s.kind() {
            if thread_extent_of(a).is_some() {
                return match self.extract(s) {
                    Ok(call) => call,
                    Err(e) => {
                        self.error.get_or_insert(e);
                        s.clone()
                    }
                };
            }
        }
        mutate_stmt_children(self, s)
    }
}

impl Splitter {
    /// Makes region `s` a kernel and returns the host's launch of it.
    fn extract(&mut self, s: &Stmt) -> Result<Stmt> {
        let kname = format!("{}_kernel{}", self.name, self.kernels.len());
        let mut launches: Vec<(ThreadTag, Var, PrimExpr)> = Vec::new();
        let mut problem: Option<String> = None;
        post_order_visit(s, |n| match n {
            IrRef::Stmt(st) => match st.kind() {
                StmtKind::AttrStmt(a) => {
                    if let Some((v, tag)) = thread_extent_of(a) {
                        launches.push((tag, v, a.value.clone()));
                    }
                }
                StmtKind::Allocate(al) if matches!(&*al.scope, "" | "global") => {
                    problem.get_or_insert(format!(
                        "allocates `{}` in global memory; a kernel may only allocate `shared` \
                         or `local` memory (set_scope on the stage)",
                        al.buffer_var.name()
                    ));
                }
                _ => {}
            },
            IrRef::Expr(e) => {
                if let ExprKind::Call { op, .. } = e.kind() {
                    if op == CALL_PACKED || op == builtin::TVM_CALL_PACKED_LOWERED {
                        problem.get_or_insert("calls a packed function".to_string());
                    }
                }
            }
        });
        if let Some(p) = problem {
            return Err(Error::value_error(format!(
                "SplitHostDevice: kernel `{kname}` of `{}` {p}",
                self.name
            )));
        }
        // Post-order lists inner launches first; keep the order of first launch.
        launches.reverse();
        let mut order: Vec<(ThreadTag, Var, PrimExpr)> = Vec::new();
        for (tag, v, ext) in launches {
            match order.iter().find(|(t, _, _)| *t == tag) {
                Some((_, _, prev)) if !structural_equal(prev, &ext) => {
                    return Err(Error::value_error(format!(
                        "SplitHostDevice: kernel `{kname}` of `{}` launches `{}` with two \
                         extents, {prev} and {ext}",
                        self.name,
                        tag.name()
                    )))
                }
                Some(_) => {}
                None => order.push((tag, v, ext)),
            }
        }
        let thread_vars: HashSet<Var> = order.iter().map(|(_, v, _)| v.clone()).collect();
        let free: Vec<Var> = undefined_vars(s)
            .into_iter()
            .filter(|v| !thread_vars.contains(v))
            .collect();
        let defined_inside = |e: &PrimExpr| {
            crate::visitor::undefined_vars_expr(e)
                .into_iter()
                .find(|v| !free.contains(v))
        };
        for (tag, _, ext) in &order {
            if let Some(v) = defined_inside(ext) {
                return Err(Error::value_error(format!(
                    "SplitHostDevice: kernel `{kname}` of `{}`: the extent {ext} of `{}` uses \
                     `{}`, which the host does not know (launch extents may only use the \
                     function's arguments)",
                    self.name,
                    tag.name(),
                    v.name()
                )));
            }
        }
        let param_data: Vec<Var> = self
            .func
            .params()
            .iter()
            .filter_map(|p| self.func.buffer_map().get(p).map(|b| b.data().clone()))
            .collect();
        let rank = |v: &Var| {
            param_data
                .iter()
                .position(|d| d == v)
                .unwrap_or(param_data.len())
        };
        let mut handles: Vec<Var> = free
            .iter()
            .filter(|v| v.dtype().is_handle())
            .cloned()
            .collect();
        handles.sort_by_key(rank);
        let scalars = free.iter().filter(|v| !v.dtype().is_handle()).cloned();
        let params: Vec<Var> = handles.into_iter().chain(scalars).collect();
        let tags: Vec<Any> = order.iter().map(|(t, _, _)| Any::from(t.name())).collect();
        let attrs = Map::new(vec![
            (Any::from("global_symbol"), Any::from(kname.as_str())),
            (Any::from("calling_conv"), Any::from(DEVICE_KERNEL_LAUNCH)),
            (Any::from(KERNEL_LAUNCH_PARAMS), Any::from(Array::new(tags))),
        ]);
        let kernel = PrimFunc::new(
            params.clone(),
            s.clone(),
            DataType::void(),
            Vec::new(),
            attrs,
        )?;
        self.kernels.push(kernel);
        let mut args: Vec<PrimExpr> = params.iter().map(|v| v.to_expr()).collect();
        args.extend(order.into_iter().map(|(_, _, e)| e));
        Ok(Stmt::evaluate(call_packed(&kname, args)))
    }
}

/// Checks that host code `body` no longer reads or writes buffers: every access must be inside
/// a kernel (TVM's VerifyMemory); the error names the unbound loops around the access.
fn verify_host_memory(name: &str, body: &Stmt, target: &str) -> Result<()> {
    fn walk(s: &Stmt, loops: &mut Vec<String>) -> Option<(String, Vec<String>)> {
        let mut found = None;
        let mut check = |e: &PrimExpr| {
            post_order_visit_expr_first(e, &mut found);
        };
        match s.kind() {
            StmtKind::For(f) => {
                loops.push(f.loop_var.name().to_string());
                let r = walk(&f.body, loops);
                if r.is_some() {
                    return r;
                }
                loops.pop();
                return None;
            }
            StmtKind::BufferStore(st) => {
                return Some((st.buffer.name().to_string(), loops.clone()));
            }
            StmtKind::Seq(q) => return q.seq.iter().find_map(|x| walk(x, loops)),
            StmtKind::IfThenElse(i) => {
                check(&i.condition);
                if found.is_none() {
                    found = walk(&i.then_case, loops).map(|(b, _)| b);
                }
                if found.is_none() {
                    if let Some(e) = &i.else_case {
                        found = walk(e, loops).map(|(b, _)| b);
                    }
                }
            }
            StmtKind::LetStmt(l) => {
                check(&l.value);
                if found.is_none() {
                    return walk(&l.body, loops);
                }
            }
            StmtKind::Allocate(a) => return walk(&a.body, loops),
            StmtKind::DeclBuffer(d) => return walk(&d.body, loops),
            StmtKind::AttrStmt(a) => return walk(&a.body, loops),
            StmtKind::Assert(a) => {
                check(&a.condition);
                if found.is_none() {
                    return walk(&a.body, loops);
                }
            }
            StmtKind::Evaluate(e) => check(&e.value),
        }
        found.map(|b| (b, loops.clone()))
    }
    fn post_order_visit_expr_first(e: &PrimExpr, found: &mut Option<String>) {
        crate::visitor::post_order_visit_expr(e, |x| {
            if let ExprKind::BufferLoad { buffer, .. } = x.kind() {
                found.get_or_insert_with(|| buffer.name().to_string());
            }
        });
    }
    let Some((buffer, loops)) = walk(body, &mut Vec::new()) else {
        return Ok(());
    };
    let where_ = match loops.last() {
        Some(l) => format!(
            "loop `{l}` is not bound to a thread (blockIdx/threadIdx), so `{buffer}` would be \
             accessed by host code"
        ),
        None => {
            format!("`{buffer}` is accessed outside of any thread-bound loop, i.e. by host code")
        }
    };
    Err(Error::value_error(format!(
        "memory verification failed for `{name}` (target {target}): {where_}. Did you forget \
         to bind? (s[T].bind(axis, te.thread_axis(\"threadIdx.x\")))"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::Buffer;
    use crate::thread_axis::THREAD_EXTENT;

    fn f32t() -> DataType {
        DataType::float(32)
    }

    /// `for i in 0..n: B[i] = ...` as a function over A, B, with `body` inside a launch of
    /// `threadIdx.x` over 64.
    fn kernel_func(body: impl FnOnce(&Var, &Buffer, &Buffer) -> Stmt) -> PrimFunc {
        let a = Buffer::decl("A", f32t(), vec![PrimExpr::i32(64)]);
        let b = Buffer::decl("B", f32t(), vec![PrimExpr::i32(64)]);
        let tx = Var::int32("threadIdx.x");
        let inner = body(&tx, &a, &b);
        let s = Stmt::attr(tx.clone(), THREAD_EXTENT, 64, inner);
        PrimFunc::from_buffers("f", &[a, b], s)
    }

    #[test]
    fn kernels_may_not_call_packed_functions() {
        let f = kernel_func(|tx, _, b| {
            Stmt::seq(vec![
                b.store(PrimExpr::f32(1.0), vec![tx.to_expr()]),
                Stmt::evaluate(call_packed("g", vec![])),
            ])
        });
        let e = split_function("f", &f, 4, "opencl")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("kernel `f_kernel0` of `f` calls a packed function"),
            "{e}"
        );
    }

    #[test]
    fn one_tag_with_two_extents_is_refused() {
        let f = kernel_func(|tx, a, b| {
            Stmt::attr(
                tx.clone(),
                THREAD_EXTENT,
                32,
                b.store(a.load(vec![tx.to_expr()]), vec![tx.to_expr()]),
            )
        });
        let e = split_function("f", &f, 4, "opencl")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("launches `threadIdx.x` with two extents, 64 and 32"),
            "{e}"
        );
    }

    #[test]
    fn kernels_take_handles_in_parameter_order_then_scalars() {
        let f = kernel_func(|tx, a, b| b.store(a.load(vec![tx.to_expr()]), vec![tx.to_expr()]));
        let (host, kernels) = split_function("f", &f, 2, "cuda").unwrap();
        assert_eq!(device_type_of(&host), 2);
        assert_eq!(kernels.len(), 1);
        let names: Vec<&str> = kernels[0].params().iter().map(|p| p.name()).collect();
        assert_eq!(names.len(), 2);
        assert!(is_device_kernel(&kernels[0]));
        assert_eq!(launch_params_of(&kernels[0]), ["threadIdx.x"]);
        assert!(!is_device_kernel(&host));
    }
}
