//! The pass infrastructure and the lowering passes (TVM's `tvm.transform` + `tir.transform`).
//!
//! A [`Pass`] is a named function from [`IRModule`] to [`IRModule`] with an opt level; a
//! [`sequential`] pass runs others in order; a [`PassContext`] decides which passes run (opt
//! level, disabled names), prints the IR after passes and carries configuration values.
//! [`lower_pipeline`] is the default list that `tvm.lower` + host lowering run:
//!
//! | phase | passes |
//! | --- | --- |
//! | 0 | [`InjectPrefetch`](fn@inject_prefetch), [`StorageFlatten`](storage_flatten) |
//! | 1 | [`Simplify`](simplify), [`LoopPartition`](loop_partition) |
//! | 2 | [`VectorizeLoop`](vectorize_loop), [`UnrollLoop`](unroll_loop), `Simplify`, [`StorageRewrite`](storage_rewrite), [`RemoveNoOp`](remove_no_op), [`RewriteUnsafeSelect`](rewrite_unsafe_select) |
//! | device | [`SplitHostDevice`](split_host_device), [`ThreadSync`](thread_sync) (device targets only, before host lowering) |
//! | host | [`MakePackedAPI`](make_packed_api), [`LowerTVMBuiltin`](lower_tvm_builtin) |
//!
//! # Configuration keys
//! `tir.UnrollLoop.auto_max_step` (int, default 0: no automatic unrolling),
//! `tir.UnrollLoop.auto_max_depth` (default 8), `tir.UnrollLoop.auto_max_extent` (default 0),
//! `tir.disable_vectorize` (bool: vectorized loops become serial).
//!
//! # Python / C
//! Passes are objects (`transform.Pass`, reflected fields `name` and `opt_level`). Globals:
//! `transform.StorageFlatten()`, `transform.Simplify()`, `transform.LoopPartition()`,
//! `transform.VectorizeLoop()`, `transform.UnrollLoop()`, `transform.StorageRewrite()`,
//! `transform.RemoveNoOp()`, `transform.RewriteUnsafeSelect()`, `transform.MakePackedAPI()`,
//! `transform.LowerTVMBuiltin()`, `transform.LowerPipeline()` each return a `Pass`;
//! `transform.Sequential(passes, name?)` combines them; `transform.RunPass(pass, mod,
//! opt_level?, disabled_pass?, config?)` runs one (a fresh [`PassContext`] with the given opt
//! level, list of disabled pass names and config map) and returns the new module.

pub mod inject_prefetch;
pub mod loop_partition;
pub mod lower_tvm_builtin;
pub mod make_packed_api;
mod pass;
pub mod remove_no_op;
pub mod rewrite_unsafe_select;
pub mod simplify;
pub mod split_host_device;
pub mod storage_flatten;
pub mod storage_rewrite;
pub mod thread_sync;
pub mod unroll_loop;
pub mod vectorize_loop;

#[cfg(test)]
mod pipeline_tests;

pub use inject_prefetch::inject_prefetch;
pub use loop_partition::loop_partition;
pub use lower_tvm_builtin::lower_tvm_builtin;
pub use make_packed_api::make_packed_api;
pub use pass::{PassNode, PassRef};
pub use remove_no_op::remove_no_op;
pub use rewrite_unsafe_select::rewrite_unsafe_select;
pub use simplify::simplify;
pub use split_host_device::split_host_device;
pub use storage_flatten::storage_flatten;
pub use storage_rewrite::storage_rewrite;
pub use thread_sync::thread_sync;
pub use unroll_loop::unroll_loop;
pub use vectorize_loop::vectorize_loop;

use crate::cpu::CpuDesc;
use crate::function::{IRModule, PrimFunc};
use kiln_ffi::{register_global, Any, Array, Map, Result};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

/// The function a pass over modules of type `M` runs (TIR modules by default).
pub type PassFn<M = IRModule> = Arc<dyn Fn(M, &PassContext) -> Result<M> + Send + Sync>;

/// What a pass does when run (not reflected), for modules of type `M` and passes of type `P`
/// (the TIR's passes and the graph's share it).
#[derive(Clone, Default)]
pub enum PassBody<M = IRModule, P = Pass> {
    /// Returns the module unchanged (what a pass made field by field from C gets).
    #[default]
    Identity,
    /// A module-to-module function.
    Func(PassFn<M>),
    /// Other passes in order, each checked against the context.
    Sequential(Vec<P>),
}

impl<M: fmt::Display, P> PassBody<M, P> {
    /// Runs the pass called `name` with this body on `module` if `ctx` enables it (else
    /// returns `module`), then prints the IR if asked; `run` runs each member of a sequential
    /// pass (which checks itself against the context).
    pub fn run(
        &self,
        name: &str,
        opt_level: i64,
        module: M,
        ctx: &PassContext,
        run: impl Fn(&P, M, &PassContext) -> Result<M>,
    ) -> Result<M> {
        if !ctx.runs(name, opt_level) {
            return Ok(module);
        }
        let out = match self {
            PassBody::Identity => module,
            PassBody::Func(f) => f(module, ctx)?,
            PassBody::Sequential(passes) => {
                let mut m = module;
                for p in passes {
                    m = run(p, m, ctx)?;
                }
                m
            }
        };
        if !matches!(self, PassBody::Sequential(_)) {
            ctx.after_pass(name, &out);
        }
        Ok(out)
    }
}

crate::declare_pass_node!(PassObj, "transform.Pass", IRModule, false);

/// A TIR pass handle. Cheap to clone.
pub type Pass = PassRef<PassObj>;

/// A pass that rewrites each `PrimFunc` of a module with `f` (TVM's `prim_func_pass`).
pub fn prim_func_pass(
    name: &str,
    opt_level: i64,
    f: impl Fn(PrimFunc, &PassContext) -> Result<PrimFunc> + Send + Sync + 'static,
) -> Pass {
    Pass::new(name, opt_level, move |m, ctx| {
        let mut out = m.clone();
        for (gname, func) in m.functions().iter() {
            let new = f(func.clone(), ctx)?;
            if !new.same_as(func) {
                out = out.with_function(gname, new);
            }
        }
        Ok(out)
    })
}

/// Passes run in order as one pass (opt level 0: the members' levels decide).
pub fn sequential(name: &str, passes: Vec<Pass>) -> Pass {
    Pass::sequential(name, passes)
}

/// Which passes print the IR after they run.
#[derive(Clone, Default)]
pub enum PrintIr {
    /// None.
    #[default]
    Off,
    /// Every pass.
    All,
    /// The passes with these names.
    Selected(HashSet<String>),
}

/// Receives `(pass name, module)` after a pass when printing is on; the module is the IR of
/// whichever pipeline runs (TIR here, the graph IR in `kiln-graph`).
pub type PrintHook = Arc<dyn Fn(&str, &dyn fmt::Display) + Send + Sync>;

/// What passes run and how (TVM's `PassContext`): opt level (default 2), disabled pass names,
/// printing after passes (to `hook`, or stderr without one) and configuration values. The graph
/// passes of `kiln-graph` use the same context.
#[derive(Clone)]
pub struct PassContext {
    /// Passes with a higher opt level are skipped.
    pub opt_level: i64,
    /// Passes with these names are skipped.
    pub disabled: HashSet<String>,
    /// Passes with these names run whatever their level (TVM's `required_pass`).
    pub required: HashSet<String>,
    /// Which passes print.
    pub print_ir_after: PrintIr,
    /// Where printing goes (`None`: stderr).
    pub hook: Option<PrintHook>,
    /// Configuration values by key (see the module docs).
    pub config: HashMap<String, Any>,
    /// The CPU the module is compiled for: what layout and tiling decisions read (default: the
    /// x86-64 baseline; a build sets its target's).
    pub cpu: CpuDesc,
}

impl Default for PassContext {
    fn default() -> Self {
        PassContext {
            opt_level: 2,
            disabled: HashSet::new(),
            required: HashSet::new(),
            print_ir_after: PrintIr::Off,
            hook: None,
            config: HashMap::new(),
            cpu: CpuDesc::default(),
        }
    }
}

impl PassContext {
    /// A default context with another opt level.
    pub fn with_opt_level(opt_level: i64) -> Self {
        PassContext {
            opt_level,
            ..Default::default()
        }
    }

    /// The same context compiling for `cpu`.
    pub fn with_cpu(mut self, cpu: CpuDesc) -> Self {
        self.cpu = cpu;
        self
    }

    /// Disables the pass called `name`.
    pub fn disable(mut self, name: &str) -> Self {
        self.disabled.insert(name.to_string());
        self
    }

    /// Sets configuration value `key`.
    pub fn set_config(mut self, key: &str, value: impl Into<Any>) -> Self {
        self.config.insert(key.to_string(), value.into());
        self
    }

    /// Prints the IR after every pass (`hook` or stderr).
    pub fn print_all(mut self, hook: Option<PrintHook>) -> Self {
        self.print_ir_after = PrintIr::All;
        self.hook = hook;
        self
    }

    /// Prints the IR after the passes called `names`.
    pub fn print_after(mut self, names: &[&str], hook: Option<PrintHook>) -> Self {
        self.print_ir_after = PrintIr::Selected(names.iter().map(|s| s.to_string()).collect());
        self.hook = hook;
        self
    }

    /// Integer configuration value `key` (bools count as 0/1), or `default`.
    pub fn config_int(&self, key: &str, default: i64) -> i64 {
        match self.config.get(key) {
            Some(v) => v
                .try_as::<i64>()
                .or_else(|_| v.try_as::<bool>().map(i64::from))
                .unwrap_or(default),
            None => default,
        }
    }

    /// True when `pass` should run here.
    pub fn enabled(&self, pass: &Pass) -> bool {
        self.runs(pass.name(), pass.opt_level())
    }

    /// True when a pass called `name` with level `opt_level` should run here.
    pub fn runs(&self, name: &str, opt_level: i64) -> bool {
        if self.disabled.contains(name) {
            return false;
        }
        self.required.contains(name) || opt_level <= self.opt_level
    }

    /// Prints `module` after the pass called `name` when this context asks for it.
    pub fn after_pass(&self, name: &str, module: &dyn fmt::Display) {
        let print = match &self.print_ir_after {
            PrintIr::Off => false,
            PrintIr::All => true,
            PrintIr::Selected(s) => s.contains(name),
        };
        if print {
            match &self.hook {
                Some(h) => h(name, module),
                None => eprintln!("# IR after {name}\n{module}"),
            }
        }
    }
}

/// The default lowering list (phases 0-2 of `tvm.lower`, then host lowering); see the
/// module docs.
pub fn lower_pipeline() -> Pass {
    sequential(
        "tir.LowerPipeline",
        vec![
            inject_prefetch(),
            storage_flatten(),
            simplify(),
            loop_partition(),
            vectorize_loop(),
            unroll_loop(),
            simplify(),
            storage_rewrite(),
            remove_no_op(),
            rewrite_unsafe_select(),
            make_packed_api(),
            lower_tvm_builtin(),
        ],
    )
}

/// Links this module's registrations (they live in this file).
#[doc(hidden)]
pub fn link_transform_globals() -> *const () {
    link_transform_globals as *const ()
}

register_global!("transform.InjectPrefetch", || inject_prefetch());
register_global!("transform.StorageFlatten", || storage_flatten());
register_global!("transform.Simplify", || simplify());
register_global!("transform.LoopPartition", || loop_partition());
register_global!("transform.VectorizeLoop", || vectorize_loop());
register_global!("transform.UnrollLoop", || unroll_loop());
register_global!("transform.StorageRewrite", || storage_rewrite());
register_global!("transform.RemoveNoOp", || remove_no_op());
register_global!("transform.RewriteUnsafeSelect", || rewrite_unsafe_select());
register_global!("transform.MakePackedAPI", || make_packed_api());
register_global!("transform.LowerTVMBuiltin", || lower_tvm_builtin());
register_global!("transform.LowerPipeline", || lower_pipeline());
register_global!("transform.Sequential", |passes: Array,
                                          name: Option<String>|
 -> Result<Pass> {
    Ok(sequential(
        name.as_deref().unwrap_or("sequential"),
        passes.to_vec::<Pass>()?,
    ))
});
register_global!("transform.RunPass", |pass: Pass,
                                       module: IRModule,
                                       opt_level: Option<i64>,
                                       disabled: Option<Array>,
                                       config: Option<Map>|
 -> Result<IRModule> {
    let mut ctx = PassContext::with_opt_level(opt_level.unwrap_or(2));
    if let Some(d) = disabled {
        ctx.disabled = d.to_vec::<String>()?.into_iter().collect();
    }
    if let Some(c) = config {
        for (k, v) in c.iter() {
            ctx.config.insert(k.try_as::<String>()?, v.to_owned());
        }
    }
    pass.run(module, &ctx)
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;
    use std::sync::Mutex;

    fn tiny() -> IRModule {
        let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(4)]);
        let body = a.store(PrimExpr::f32(1.0) + 0.0, vec![PrimExpr::i32(0)]);
        IRModule::from_func("f", PrimFunc::from_buffers("f", &[a], body))
    }

    #[test]
    fn context_selects_and_prints() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let hook: PrintHook =
            Arc::new(move |n: &str, _m: &dyn fmt::Display| s2.lock().unwrap().push(n.to_string()));
        let counter = prim_func_pass("count", 3, |f, _| Ok(f));
        let seq = sequential("s", vec![simplify(), remove_no_op(), counter]);
        let ctx = PassContext::default()
            .disable("tir.RemoveNoOp")
            .print_all(Some(hook));
        seq.run(tiny(), &ctx).unwrap();
        assert_eq!(*seen.lock().unwrap(), vec!["tir.Simplify".to_string()]);
        assert_eq!(ctx.config_int("missing", 7), 7);
        let ctx = PassContext::default().set_config("k", 3i64);
        assert_eq!(ctx.config_int("k", 0), 3);
        assert_eq!(lower_pipeline().passes().len(), 12);
    }

    #[test]
    fn passes_are_reachable_as_globals() {
        let f = kiln_ffi::registry::get("transform.Simplify").expect("registered");
        let p: Pass = f.invoke(()).unwrap();
        assert_eq!(p.name(), "tir.Simplify");
        let run = kiln_ffi::registry::get("transform.RunPass").unwrap();
        let out: IRModule = run
            .invoke((p, tiny(), None::<i64>, None::<Array>, None::<Map>))
            .unwrap();
        let f = out.lookup("f").unwrap();
        assert!(!f.body().to_string().contains('+'), "{}", f.body());
    }
}
