//! Parallel loops, as TVM's `CodeGenCPU`: the loop is outlined into an internal
//! `__tvm_parallel_lambda(int task_id, TVMParallelGroupEnv* env, void* cdata)` whose closure
//! struct holds the captured variables (plus the loop's min and extent); each task runs the
//! contiguous chunk `[task_id * step, min((task_id + 1) * step, extent))` with
//! `step = ceil(extent / env->num_task)`. The function calls the runtime through the
//! `__TVMBackendParallelLaunch` context slot with `num_task = 0` (the runtime chooses) and
//! returns -1 when it fails (a task's error is already raised). Parallel loops nested in a
//! parallel body run serially.

use super::{CodeGen, FuncState};
use crate::llvm::llvm_error;
use crate::llvm::symbols::{self, ContextSlot};
use inkwell::module::Linkage;
use inkwell::types::BasicTypeEnum;
use inkwell::values::BasicValueEnum;
use inkwell::IntPredicate;
use kiln_ffi::Result;
use kiln_tir::stmt::ForObj;
use kiln_tir::visitor::undefined_vars;
use kiln_tir::Var;
use std::collections::HashMap;

impl<'a, 'ctx> CodeGen<'a, 'ctx> {
    pub(crate) fn parallel_for(&mut self, f: &ForObj) -> Result<()> {
        let t = f.loop_var.dtype();
        let min = self.expr(&f.min)?;
        let min = self.cast(f.min.dtype(), t, min)?;
        let ext = self.expr(&f.extent)?;
        let ext = self.cast(f.extent.dtype(), t, ext)?;

        // The closure: the loop's min and extent, then every variable in scope that the body
        // uses.
        let captured: Vec<(Var, BasicValueEnum<'ctx>)> = undefined_vars(&f.body)
            .into_iter()
            .filter(|v| v != &f.loop_var)
            .filter_map(|v| self.vars.get(&v).map(|x| (v.clone(), *x)))
            .collect();
        let mut field_types: Vec<BasicTypeEnum<'ctx>> = vec![min.get_type(), ext.get_type()];
        field_types.extend(captured.iter().map(|(_, x)| x.get_type()));
        let closure_t = self.ctx.struct_type(&field_types, false);
        let closure = self.entry_alloca(closure_t.into(), 8, "closure")?;
        let mut values = vec![min, ext];
        values.extend(captured.iter().map(|(_, x)| *x));
        for (i, v) in values.iter().enumerate() {
            let p = self
                .b
                .build_struct_gep(closure_t, closure, i as u32, "cap")
                .map_err(llvm_error)?;
            self.b.build_store(p, *v).map_err(llvm_error)?;
        }

        // The lambda.
        // Named after the function it comes from (LLVM numbers repeats), as the C back end does.
        let lambda = self.module.add_function(
            &format!("__tvm_parallel_lambda_{}", self.func_name),
            self.abi.parallel_lambda,
            Some(Linkage::Internal),
        );
        self.target.set_function_attributes(self.ctx, lambda);
        let saved_block = self.b.get_insert_block().expect("positioned");
        let saved_func = self.func;
        let saved_vars = std::mem::take(&mut self.vars);
        let entry = self.ctx.append_basic_block(lambda, "entry");
        self.func = Some(FuncState {
            function: lambda,
            entry,
        });
        self.in_parallel = true;
        self.b.position_at_end(entry);
        let r = self.lambda_body(f, lambda, closure_t, &captured);
        self.in_parallel = false;
        self.vars = saved_vars;
        self.func = saved_func;
        self.b.position_at_end(saved_block);
        r?;

        // The launch.
        let rc = symbols::build_slot_call(
            &self.b,
            self.module,
            &self.abi,
            ContextSlot::BackendParallelLaunch,
            &[
                lambda.as_global_value().as_pointer_value().into(),
                closure.into(),
                self.abi.i32.const_zero().into(),
            ],
            "launch",
        )?
        .try_as_basic_value()
        .basic()
        .expect("ParallelLaunch returns i32")
        .into_int_value();
        let ok = self
            .b
            .build_int_compare(IntPredicate::EQ, rc, self.abi.i32.const_zero(), "launch.ok")
            .map_err(llvm_error)?;
        let ok_bb = self.block("parallel_ok");
        let fail_bb = self.block("parallel_fail");
        self.b
            .build_conditional_branch(ok, ok_bb, fail_bb)
            .map_err(llvm_error)?;
        self.b.position_at_end(fail_bb);
        self.b
            .build_return(Some(&self.abi.i32.const_all_ones()))
            .map_err(llvm_error)?;
        self.b.position_at_end(ok_bb);
        Ok(())
    }

    fn lambda_body(
        &mut self,
        f: &ForObj,
        lambda: inkwell::values::FunctionValue<'ctx>,
        closure_t: inkwell::types::StructType<'ctx>,
        captured: &[(Var, BasicValueEnum<'ctx>)],
    ) -> Result<()> {
        let task_id = lambda.get_nth_param(0).expect("task_id").into_int_value();
        let env = lambda.get_nth_param(1).expect("env").into_pointer_value();
        let cdata = lambda.get_nth_param(2).expect("cdata").into_pointer_value();
        task_id.set_name("task_id");
        env.set_name("env");
        cdata.set_name("cdata");
        let mut loaded = Vec::with_capacity(captured.len() + 2);
        for i in 0..captured.len() as u32 + 2 {
            let p = self
                .b
                .build_struct_gep(closure_t, cdata, i, "cap")
                .map_err(llvm_error)?;
            let ty = closure_t.get_field_type_at_index(i).expect("field");
            loaded.push(self.b.build_load(ty, p, "cap").map_err(llvm_error)?);
        }
        let mut vars = HashMap::with_capacity(captured.len());
        for ((v, _), x) in captured.iter().zip(&loaded[2..]) {
            vars.insert(v.clone(), *x);
        }
        self.vars = vars;
        let min = loaded[0].into_int_value();
        let ext = loaded[1].into_int_value();
        let it = ext.get_type();
        let nt_p = self
            .b
            .build_struct_gep(self.abi.parallel_group_env, env, 1, "num_task.p")
            .map_err(llvm_error)?;
        let nt = self
            .b
            .build_load(self.abi.i32, nt_p, "num_task")
            .map_err(llvm_error)?
            .into_int_value();
        let b = &self.b;
        let nt = b
            .build_int_s_extend_or_bit_cast(nt, it, "nt")
            .map_err(llvm_error)?;
        let nt = {
            // At least one task.
            let one = it.const_int(1, false);
            let lt = b
                .build_int_compare(IntPredicate::SLT, nt, one, "nt.lt1")
                .map_err(llvm_error)?;
            b.build_select(lt, one, nt, "nt")
                .map_err(llvm_error)?
                .into_int_value()
        };
        let tid = b
            .build_int_s_extend_or_bit_cast(task_id, it, "tid")
            .map_err(llvm_error)?;
        let one = it.const_int(1, false);
        let step = b.build_int_add(ext, nt, "s").map_err(llvm_error)?;
        let step = b.build_int_sub(step, one, "s").map_err(llvm_error)?;
        let step = b
            .build_int_signed_div(step, nt, "step")
            .map_err(llvm_error)?;
        let smin = |x, y, name: &str| -> Result<inkwell::values::IntValue<'ctx>> {
            let lt = b
                .build_int_compare(IntPredicate::SLT, x, y, name)
                .map_err(llvm_error)?;
            Ok(b.build_select(lt, x, y, name)
                .map_err(llvm_error)?
                .into_int_value())
        };
        let begin = b.build_int_mul(tid, step, "begin").map_err(llvm_error)?;
        let begin = smin(begin, ext, "begin")?;
        let end = b.build_int_add(begin, step, "end").map_err(llvm_error)?;
        let end = smin(end, ext, "end")?;
        self.emit_loop(&f.loop_var, begin, end, Some(min), &f.body)?;
        self.finish_function()?;
        Ok(())
    }
}
