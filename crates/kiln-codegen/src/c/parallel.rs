//! Parallel loops, as TVM's `CodeGenCPU` (and Kiln's LLVM code generator) make them: the loop
//! is outlined into a static `__tvm_parallel_lambda_<f>_<n>(int32_t task_id,
//! TVMParallelGroupEnv* env, void* cdata)` whose closure struct holds the loop's min and extent
//! and every captured variable; each task runs the contiguous chunk `[task_id * step,
//! min((task_id + 1) * step, extent))` with `step = ceil(extent / env->num_task)`. The caller
//! fills the closure on its stack and calls the runtime through the
//! `__TVMBackendParallelLaunch` context slot with `num_task = 0` (the runtime chooses), and
//! returns -1 when the launch fails (a task's error is already raised). Parallel loops nested
//! in a parallel body run serially.

use super::{scalar_ctype, CodeGenC};
use crate::llvm::symbols::ContextSlot;
use kiln_ffi::Result;
use kiln_tir::stmt::ForObj;
use kiln_tir::visitor::undefined_vars;
use kiln_tir::Var;
use std::collections::HashMap;

impl CodeGenC {
    pub(crate) fn parallel_for(&mut self, f: &ForObj) -> Result<()> {
        let it = scalar_ctype(f.loop_var.dtype())?;
        let min = self.expr(&f.min)?;
        let ext = self.expr(&f.extent)?;
        let captured: Vec<(Var, String)> = undefined_vars(&f.body)
            .into_iter()
            .filter(|v| v != &f.loop_var)
            .filter_map(|v| self.vars.get(&v).map(|n| (v.clone(), n.clone())))
            .collect();
        self.counter += 1;
        let id = self.counter;
        let fname: String = self
            .func_name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let closure_t = format!("kiln_closure_{fname}_{id}");
        let lambda = format!("__tvm_parallel_lambda_{fname}_{id}");

        let mut typedef = format!("typedef struct {{\n  {it} min;\n  {it} extent;\n");
        let mut types = Vec::with_capacity(captured.len());
        for (v, n) in &captured {
            let ct = self.ctype(v.dtype())?;
            typedef.push_str(&format!("  {ct} {n};\n"));
            types.push(ct);
        }
        typedef.push_str(&format!("}} {closure_t};\n\n"));

        // The launch, in the caller.
        let cl = self.temp("closure");
        self.line("{");
        self.indent += 1;
        self.line(format!("{closure_t} {cl};"));
        self.line(format!("{cl}.min = {min};"));
        self.line(format!("{cl}.extent = {ext};"));
        for (_, n) in &captured {
            self.line(format!("{cl}.{n} = {n};"));
        }
        let slot = self.slot(ContextSlot::BackendParallelLaunch);
        self.line(format!(
            "if (((kiln_parallel_launch_t){slot})({lambda}, &{cl}, 0) != 0) return -1;"
        ));
        self.indent -= 1;
        self.line("}");

        // The lambda.
        let saved_vars = std::mem::replace(
            &mut self.vars,
            captured.iter().cloned().collect::<HashMap<_, _>>(),
        );
        let saved_indent = self.indent;
        self.out.push(String::new());
        self.indent = 1;
        self.in_parallel = true;
        let c = self.temp("c");
        self.line(format!("{closure_t}* {c} = ({closure_t}*)cdata_;"));
        for ((_, n), ct) in captured.iter().zip(&types) {
            self.line(format!("{ct} {n} = {c}->{n};"));
            self.line(format!("(void){n};"));
        }
        let (nt, step, begin, end) = (
            self.temp("nt"),
            self.temp("step"),
            self.temp("begin"),
            self.temp("end"),
        );
        self.line(format!(
            "{it} {nt} = ({it})(env_->num_task < 1 ? 1 : env_->num_task);"
        ));
        self.line(format!(
            "{it} {step} = ({it})(({c}->extent + {nt} - 1) / {nt});"
        ));
        self.line(format!(
            "{it} {begin} = ({it})(({it})task_id_ * {step}); if ({begin} > {c}->extent) \
             {begin} = {c}->extent;"
        ));
        self.line(format!(
            "{it} {end} = ({it})({begin} + {step}); if ({end} > {c}->extent) {end} = \
             {c}->extent;"
        ));
        let (name, _) = self.bind(&f.loop_var);
        self.line(format!(
            "for ({it} {name} = ({it})({c}->min + {begin}); {name} < {c}->min + {end}; \
             ++{name}) {{"
        ));
        let r = self.block(&f.body);
        self.line("}");
        self.line("return 0;");
        self.in_parallel = false;
        self.indent = saved_indent;
        self.vars = saved_vars;
        let body = self.out.pop().expect("pushed above");
        r?;
        self.toplevel.push_str(&typedef);
        self.toplevel.push_str(&format!(
            "static int32_t {lambda}(int32_t task_id_, TVMParallelGroupEnv* env_, void* \
             cdata_) {{\n{body}}}\n\n"
        ));
        Ok(())
    }
}
