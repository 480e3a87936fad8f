//! [`VirtualMachine`]: runs a [`Code`] over static graph segments (each a [`GraphExecutor`]
//! over the shared library) and runtime builtins, with tensors in registers.

use super::code::{builtin_name, Code, Instr, Reg, Slot};
use super::factory::Segment;
use crate::executor::Executor;
use crate::graph_executor::GraphExecutor;
use crate::module::Module;
use crate::tensor::Tensor;
use kiln_ffi::{Any, DataType, Device, Error, Function, Result};
use std::sync::Arc;

/// The most instructions one run executes before it is stopped as runaway, unless
/// [`VirtualMachine::set_step_limit`] says otherwise.
pub const MAX_STEPS: u64 = 1 << 32;

/// A static graph segment ready to run.
struct SegmentExec {
    exec: GraphExecutor,
    /// The graph's run-time inputs (indices among its inputs), in order.
    inputs: Vec<usize>,
}

/// The module kind of virtual machine executors.
pub const KIND: &str = "VirtualMachine";

/// A virtual machine executing one program.
pub struct VirtualMachine {
    code: Arc<Code>,
    segments: Vec<SegmentExec>,
    /// The builtin or library kernel called by each instruction (`None` for others).
    builtins: Vec<Option<Function>>,
    /// The device that holds registers and the tensors kernels write.
    device: Device,
    /// The tensors each `Kernel` instruction wrote last (by instruction, then result): used
    /// again when the same shape comes again, outside loops (as a graph executor's outputs,
    /// they are overwritten by the next run).
    kernel_mem: Vec<Vec<Option<Tensor>>>,
    /// Whether each instruction is inside a loop (between a backward jump and its target): a
    /// segment run there again overwrites its output memory, so its outputs are copied out.
    in_loop: Vec<bool>,
    /// Register values: tensors, or lists of tensors (a Loop's scan outputs as they grow).
    regs: Vec<Option<Any>>,
    /// The memory of each input (replaced by `set_input_zero_copy`).
    inputs: Vec<Tensor>,
    /// Whether the last run finished (outputs are readable).
    done: bool,
    /// The most instructions one run executes.
    step_limit: u64,
}

impl VirtualMachine {
    /// A machine for `code` whose segments run with the functions of `lib` on `devices` (the
    /// first one holds inputs and registers). Checks every instruction against the segments
    /// and the builtins this runtime has.
    pub fn new(
        code: Arc<Code>,
        segments: &[Segment],
        lib: &Module,
        devices: &[Device],
    ) -> Result<VirtualMachine> {
        let device = *devices
            .first()
            .ok_or_else(|| Error::value_error("VirtualMachine: pass at least one device"))?;
        let mut execs = Vec::with_capacity(segments.len());
        for (k, s) in segments.iter().enumerate() {
            // Segments use the factory's param tensors in place where they can (one copy of
            // the weights for every shape a library was compiled for).
            let params = s.params.iter().map(|(k, v)| (k.as_str(), v));
            let exec = GraphExecutor::with_params(s.graph.clone(), lib.clone(), devices, params)
                .map_err(|e| e.context(format!("VM segment {k}")))?;
            execs.push(SegmentExec {
                inputs: s.runtime_inputs(),
                exec,
            });
        }
        let mut builtins = Vec::with_capacity(code.instrs.len());
        for (pc, ins) in code.instrs.iter().enumerate() {
            builtins.push(None);
            match ins {
                Instr::Run {
                    segment,
                    args,
                    rets,
                } => {
                    let s = execs.get(*segment).ok_or_else(|| {
                        Error::value_error(format!(
                            "VM program: instruction {pc} runs segment {segment}, but there are {}",
                            execs.len()
                        ))
                    })?;
                    if args.len() != s.inputs.len() || rets.len() != s.exec.num_outputs() {
                        return Err(Error::value_error(format!(
                            "VM program: instruction {pc} passes {} input(s) and takes {} \
                             output(s), but segment {segment} has {} and {}",
                            args.len(),
                            rets.len(),
                            s.inputs.len(),
                            s.exec.num_outputs()
                        )));
                    }
                }
                Instr::Call { func, .. } => {
                    let name = builtin_name(func);
                    let f = kiln_ffi::registry::get(&name).ok_or_else(|| {
                        Error::value_error(format!(
                            "VM program: instruction {pc} calls {name}, which this runtime does \
                             not have"
                        ))
                    })?;
                    builtins[pc] = Some(f);
                }
                Instr::Kernel { func, .. } => {
                    let f = lib.get_function(func, true)?.ok_or_else(|| {
                        Error::value_error(format!(
                            "VM program: instruction {pc} calls kernel `{func}`, which the \
                             library does not have"
                        ))
                    })?;
                    builtins[pc] = Some(f);
                }
                _ => {}
            }
        }
        let mut in_loop = vec![false; code.instrs.len()];
        for (pc, ins) in code.instrs.iter().enumerate() {
            if let Instr::Jump { target } | Instr::JumpUnless { target, .. } = ins {
                if *target <= pc {
                    in_loop[*target..=pc].iter_mut().for_each(|x| *x = true);
                }
            }
        }
        let inputs = code
            .inputs
            .iter()
            .map(|s| {
                if s.shape.iter().any(|&d| d < 0) {
                    // Shaped at run time: the first set_input brings its own memory.
                    Tensor::empty(&vec![0; s.shape.len()], s.dtype, device)
                } else {
                    Tensor::empty(&s.shape, s.dtype, device)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let kernel_mem = code
            .instrs
            .iter()
            .map(|i| match i {
                Instr::Kernel { outs, .. } => vec![None; outs.len()],
                _ => Vec::new(),
            })
            .collect();
        Ok(VirtualMachine {
            regs: vec![None; code.num_regs],
            code,
            segments: execs,
            builtins,
            device,
            kernel_mem,
            in_loop,
            inputs,
            done: false,
            step_limit: MAX_STEPS,
        })
    }

    /// The program.
    pub fn code(&self) -> &Code {
        &self.code
    }

    /// Bounds the instructions one run executes (a loop whose condition never turns false is
    /// stopped with an error instead of running on); at least 1.
    pub fn set_step_limit(&mut self, limit: u64) {
        self.step_limit = limit.max(1);
    }

    fn input_slot(&self, index: usize, what: &str) -> Result<&Slot> {
        self.code.inputs.get(index).ok_or_else(|| {
            Error::index_error(format!(
                "{what}: input index {index} is out of range: the model has {} inputs ({})",
                self.code.inputs.len(),
                self.input_names().join(", ")
            ))
        })
    }

    fn output_slot(&self, index: usize, what: &str) -> Result<&Slot> {
        self.code.outputs.get(index).ok_or_else(|| {
            Error::index_error(format!(
                "{what}: output index {index} is out of range: the model has {} outputs",
                self.code.outputs.len()
            ))
        })
    }

    fn input_names(&self) -> Vec<&str> {
        self.code.inputs.iter().map(|s| s.name.as_str()).collect()
    }

    /// Checks that `t` fits input `index` (dtype, rank, and every dimension fixed there).
    fn check_input(&self, index: usize, t: &Tensor, what: &str) -> Result<()> {
        let s = self.input_slot(index, what)?;
        let who = format!("{what} input {:?} (#{index})", s.name);
        if t.dtype() != s.dtype {
            return Err(Error::type_error(format!(
                "{who}: expected dtype {} but got {} (shape {:?})",
                s.dtype,
                t.dtype(),
                t.shape()
            )));
        }
        if t.ndim() != s.shape.len() {
            return Err(Error::value_error(format!(
                "{who}: expected rank {} (shape {:?}) but got a tensor of shape {:?}",
                s.shape.len(),
                s.shape,
                t.shape()
            )));
        }
        for (axis, (&want, &got)) in s.shape.iter().zip(t.shape()).enumerate() {
            if want >= 0 && want != got {
                return Err(Error::value_error(format!(
                    "{who}: dimension {axis} must be {want} but is {got} (expected shape {:?}, \
                     got {:?})",
                    s.shape,
                    t.shape()
                )));
            }
        }
        Ok(())
    }

    fn reg(&self, r: Reg, pc: usize) -> Result<&Any> {
        self.regs[r].as_ref().ok_or_else(|| {
            Error::runtime_error(format!(
                "VirtualMachine: instruction {pc} reads register {r} before it is written"
            ))
        })
    }

    fn tensor_reg(&self, r: Reg, pc: usize) -> Result<Tensor> {
        let v = self.reg(r, pc)?;
        v.try_as::<Tensor>().map_err(|_| {
            Error::runtime_error(format!(
                "VirtualMachine: instruction {pc} needs a tensor in register {r}, which holds a \
                 `{}`",
                v.view().type_name()
            ))
        })
    }

    /// The shape held by register `r` (a 1-D int64 tensor of dimensions, none negative).
    fn shape_reg(&self, r: Reg, pc: usize) -> Result<Vec<i64>> {
        let t = self.tensor_reg(r, pc)?;
        let what = || format!("VirtualMachine: the shape in register {r} (instruction {pc})");
        if t.dtype() != DataType::int(64) || t.ndim() != 1 {
            return Err(Error::runtime_error(format!(
                "{} must be a 1-D int64 tensor, it is {} {:?}",
                what(),
                t.dtype(),
                t.shape()
            )));
        }
        let dims = t.to_vec::<i64>()?;
        if dims.iter().any(|&d| d < 0) {
            return Err(Error::value_error(format!(
                "{} has a negative dimension: {dims:?}",
                what()
            )));
        }
        Ok(dims)
    }

    /// One-element tensor `t` as a truth value.
    fn truth(t: &Tensor, pc: usize) -> Result<bool> {
        let what = format!("VirtualMachine: the condition of instruction {pc}");
        Ok(super::builtins::scalar(t, &what)? != 0.0)
    }

    fn step(&mut self, pc: usize) -> Result<Option<usize>> {
        match &self.code.instrs[pc] {
            Instr::Run {
                segment,
                args,
                rets,
            } => {
                for (j, &r) in args.iter().enumerate() {
                    let t = self.tensor_reg(r, pc)?;
                    let seg = &mut self.segments[*segment];
                    let i = seg.inputs[j];
                    seg.exec.set_input(i, &t)?;
                }
                let seg = &mut self.segments[*segment];
                seg.exec.run()?;
                for (j, &r) in rets.iter().enumerate() {
                    let mut t = seg.exec.get_output(j)?;
                    if self.in_loop[pc] {
                        let copy = Tensor::empty(t.shape(), t.dtype(), t.device())?;
                        copy.copy_from(&t)?;
                        t = copy;
                    }
                    self.regs[r] = Some(t.into());
                }
            }
            Instr::Call {
                func,
                args,
                ints,
                rets,
            } => {
                let mut vals: Vec<Any> = Vec::with_capacity(args.len() + ints.len());
                for &r in args {
                    vals.push(self.reg(r, pc)?.clone());
                }
                vals.extend(ints.iter().map(|&v| Any::from(v)));
                let f = self.builtins[pc].as_ref().expect("resolved when created");
                let out = f
                    .call_any(&vals)
                    .map_err(|e| e.context(format!("vm.builtin.{func}")))?;
                // One register takes the result; several take the items of the array returned.
                let outs: Vec<Any> = if rets.len() == 1 {
                    vec![out]
                } else {
                    let arr: kiln_ffi::Array = out.try_as().map_err(|_| {
                        Error::runtime_error(format!(
                            "vm.builtin.{func} must return an array of {} values",
                            rets.len()
                        ))
                    })?;
                    arr.iter().map(Any::from).collect()
                };
                if outs.len() != rets.len() {
                    return Err(Error::runtime_error(format!(
                        "vm.builtin.{func} returned {} value(s), {} expected",
                        outs.len(),
                        rets.len()
                    )));
                }
                for (t, &r) in outs.into_iter().zip(rets) {
                    self.regs[r] = Some(t);
                }
            }
            Instr::JumpUnless { cond, target } => {
                if !Self::truth(&self.tensor_reg(*cond, pc)?, pc)? {
                    return Ok(Some(*target));
                }
            }
            Instr::Jump { target } => return Ok(Some(*target)),
            Instr::Fail { message } => {
                let given: Vec<String> = self
                    .code
                    .inputs
                    .iter()
                    .zip(&self.inputs)
                    .map(|(s, t)| format!("{} {}{:?}", s.name, t.dtype(), t.shape()))
                    .collect();
                return Err(Error::value_error(format!(
                    "{message} (given: {})",
                    given.join(", ")
                )));
            }
            Instr::Move { dst, src } => {
                self.regs[*dst] = Some(self.reg(*src, pc)?.clone());
            }
            Instr::Kernel { func, args, outs } => {
                let mut vals: Vec<Any> = Vec::with_capacity(args.len() + outs.len());
                for &r in args {
                    vals.push(self.tensor_reg(r, pc)?.into());
                }
                let mut made = Vec::with_capacity(outs.len());
                for (k, o) in outs.iter().enumerate() {
                    let shape = self.shape_reg(o.shape, pc)?;
                    // Inside a loop the last result may be an input of this call: fresh memory.
                    let t = match &self.kernel_mem[pc][k] {
                        Some(t)
                            if !self.in_loop[pc] && t.shape() == shape && t.dtype() == o.dtype =>
                        {
                            t.clone()
                        }
                        _ => {
                            let t = Tensor::empty(&shape, o.dtype, self.device)?;
                            self.kernel_mem[pc][k] = Some(t.clone());
                            t
                        }
                    };
                    vals.push(t.clone().into());
                    made.push((o.reg, t));
                }
                let f = self.builtins[pc].as_ref().expect("resolved when created");
                f.call_any(&vals)
                    .map_err(|e| e.context(format!("kernel `{func}`")))?;
                for (r, t) in made {
                    self.regs[r] = Some(t.into());
                }
            }
            Instr::Shape { dst, args, code } => {
                let ts = args
                    .iter()
                    .map(|&r| self.tensor_reg(r, pc))
                    .collect::<Result<Vec<_>>>()?;
                let dims = super::shape_expr::eval(code, &ts)
                    .map_err(|e| e.context(format!("VirtualMachine: instruction {pc}")))?;
                self.regs[*dst] = Some(super::shape_fns::shape_tensor(&dims)?.into());
            }
            Instr::View { dst, src, shape } => {
                let t = self.tensor_reg(*src, pc)?;
                let shape = self.shape_reg(*shape, pc)?;
                if shape.iter().product::<i64>() != t.numel() as i64 {
                    return Err(Error::value_error(format!(
                        "VirtualMachine: instruction {pc} views {} as {shape:?}, which has \
                         another number of elements",
                        t.describe()
                    )));
                }
                let v = t.view(&shape, t.dtype()).map_err(|e| {
                    e.context(format!("VirtualMachine: the view of instruction {pc}"))
                })?;
                self.regs[*dst] = Some(v.into());
            }
        }
        Ok(None)
    }
}

impl Executor for VirtualMachine {
    fn num_inputs(&self) -> usize {
        self.code.inputs.len()
    }

    fn num_outputs(&self) -> usize {
        self.code.outputs.len()
    }

    fn input_index(&self, name: &str) -> Option<usize> {
        self.code.inputs.iter().position(|s| s.name == name)
    }

    fn require_input(&self, name: &str, what: &str) -> Result<usize> {
        self.input_index(name).ok_or_else(|| {
            Error::key_error(format!(
                "{what}: the model has no input named {name:?} (inputs: {})",
                self.input_names().join(", ")
            ))
        })
    }

    fn input_name(&self, index: usize) -> Result<&str> {
        Ok(&self.input_slot(index, "input_name")?.name)
    }

    fn input_info(&self, index: usize) -> Result<(&[i64], DataType)> {
        let s = self.input_slot(index, "input_info")?;
        Ok((&s.shape, s.dtype))
    }

    fn output_info(&self, index: usize) -> Result<(&[i64], DataType)> {
        let s = self.output_slot(index, "output_info")?;
        Ok((&s.shape, s.dtype))
    }

    fn set_input(&mut self, index: usize, value: &Tensor) -> Result<()> {
        self.check_input(index, value, "set_input")?;
        let own = &self.inputs[index];
        if own.shape() != value.shape() || own.device() != value.device() {
            let device = own.device();
            self.inputs[index] = Tensor::empty(value.shape(), value.dtype(), device)?;
        }
        let name = &self.code.inputs[index].name;
        self.inputs[index]
            .copy_from(value)
            .map_err(|e| e.context(format!("set_input {name:?}")))
    }

    fn set_input_zero_copy(&mut self, index: usize, value: &Tensor) -> Result<()> {
        self.check_input(index, value, "set_input_zero_copy")?;
        self.inputs[index] = value.clone();
        Ok(())
    }

    fn get_input(&self, index: usize) -> Result<Tensor> {
        self.input_slot(index, "get_input")?;
        Ok(self.inputs[index].clone())
    }

    fn get_output(&self, index: usize) -> Result<Tensor> {
        let s = self.output_slot(index, "get_output")?;
        if !self.done {
            return Err(Error::runtime_error(format!(
                "get_output #{index} ({:?}): the model has not run successfully yet",
                s.name
            )));
        }
        let v = self.regs[s.reg]
            .as_ref()
            .expect("written by a finished run");
        v.try_as::<Tensor>().map_err(|_| {
            Error::runtime_error(format!(
                "get_output #{index} ({:?}) holds a `{}`, not a tensor",
                s.name,
                v.view().type_name()
            ))
        })
    }

    fn copy_output_to(&self, index: usize, out: &Tensor) -> Result<()> {
        let t = self.get_output(index)?;
        if out.shape() != t.shape() || out.dtype() != t.dtype() {
            return Err(Error::value_error(format!(
                "get_output into `out` for output #{index}: expected shape {:?} (dtype {}) but \
                 got {:?} (dtype {})",
                t.shape(),
                t.dtype(),
                out.shape(),
                out.dtype()
            )));
        }
        out.copy_from(&t)
    }

    fn run(&mut self) -> Result<()> {
        self.done = false;
        for r in self.regs.iter_mut() {
            *r = None;
        }
        for (s, t) in self.code.inputs.iter().zip(&self.inputs) {
            self.regs[s.reg] = Some(t.clone().into());
        }
        let mut pc = 0;
        let mut steps: u64 = 0;
        while pc < self.code.instrs.len() {
            steps += 1;
            if steps > self.step_limit {
                let in_loop = if self.in_loop[pc] {
                    ", inside a loop"
                } else {
                    ""
                };
                return Err(Error::runtime_error(format!(
                    "VirtualMachine: the run passed its limit of {} instructions at instruction \
                     {pc}{in_loop} and was stopped (a loop whose condition never turns false?)",
                    self.step_limit
                )));
            }
            pc = match self.step(pc)? {
                Some(target) => target,
                None => pc + 1,
            };
        }
        for (i, s) in self.code.outputs.iter().enumerate() {
            let Some(v) = &self.regs[s.reg] else {
                return Err(Error::runtime_error(format!(
                    "VirtualMachine: the run ended without writing output #{i} ({:?})",
                    s.name
                )));
            };
            // An output that is an input (a Loop run no time, a branch passing a value through)
            // is copied: what the caller does with it must not change the input.
            if let Ok(t) = v.try_as::<Tensor>() {
                if self.inputs.iter().any(|x| x.same_as(&t)) {
                    let copy = Tensor::empty(t.shape(), t.dtype(), t.device())?;
                    copy.copy_from(&t)?;
                    self.regs[s.reg] = Some(copy.into());
                }
            }
        }
        self.done = true;
        Ok(())
    }
}
