//! The virtual machine's program: registers, the inputs and outputs that name some of them, and
//! the instructions, with their byte format (little-endian, checked when loaded; errors give the
//! byte offset).
//!
//! ```text
//! u64 magic "KILNVM01"   u64 register count
//! u64 input count,  per input:  string name, u64 register, string dtype, u64 ndim, i64 dims
//! u64 output count, per output: string name, u64 register, string dtype, u64 ndim, i64 dims
//! u64 instruction count, per instruction: u64 opcode, then its operands (lists: u64 count + items)
//! ```
//!
//! A dimension of -1 is known only at run time.

use crate::graph_executor::params::ByteReader;
#[cfg(feature = "compiler")]
use crate::graph_executor::params::{put_string, put_u64};
use kiln_ffi::{DataType, Error, Result};

/// The first eight bytes of a program.
pub const MAGIC: u64 = u64::from_le_bytes(*b"KILNVM01");

/// A register index.
pub type Reg = usize;

/// One instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instr {
    /// Runs static graph `segment` with the tensors of `args` as its run-time inputs (in the
    /// graph's input order) and puts its outputs into `rets`.
    Run {
        /// The segment's index.
        segment: usize,
        /// The registers read.
        args: Vec<Reg>,
        /// The registers written.
        rets: Vec<Reg>,
    },
    /// Calls the runtime's global function `vm.builtin.<func>` with the tensors of `args`, then
    /// the integers `ints`; its result (a tensor, or an array of them) goes into `rets`.
    Call {
        /// The builtin's name without the `vm.builtin.` prefix.
        func: String,
        /// The registers read.
        args: Vec<Reg>,
        /// Integer attributes passed after the tensors.
        ints: Vec<i64>,
        /// The registers written.
        rets: Vec<Reg>,
    },
    /// Jumps to `target` when the one-element tensor in `cond` is zero (false).
    JumpUnless {
        /// The condition's register.
        cond: Reg,
        /// The instruction jumped to.
        target: usize,
    },
    /// Jumps to `target`.
    Jump {
        /// The instruction jumped to.
        target: usize,
    },
    /// Stops the run with an error: `message`, then the shapes of the inputs given (a program
    /// reaches it when no code was compiled for them).
    Fail {
        /// What went wrong.
        message: String,
    },
    /// Makes `dst` hold the tensor of `src`.
    Move {
        /// The register written.
        dst: Reg,
        /// The register read.
        src: Reg,
    },
    /// Calls the library's function `func` (a kernel compiled with extents known only at run
    /// time) with the tensors of `args`, then one new tensor per result, each shaped by the
    /// 1-D int64 tensor in its `shape` register; the results go into their registers.
    Kernel {
        /// The library function's name.
        func: String,
        /// The registers read.
        args: Vec<Reg>,
        /// The results the call writes.
        outs: Vec<KernelOut>,
    },
    /// Makes `dst` hold a 1-D int64 tensor: the shape that the program `code` (see
    /// [`super::shape_expr`]) computes from the dimensions of the tensors of `args`.
    Shape {
        /// The register written.
        dst: Reg,
        /// The registers whose dimensions the program reads.
        args: Vec<Reg>,
        /// The program.
        code: Vec<i64>,
    },
    /// Makes `dst` hold the tensor of `src` under the shape in the 1-D int64 tensor of
    /// `shape` (the same elements, no copy).
    View {
        /// The register written.
        dst: Reg,
        /// The register read.
        src: Reg,
        /// The register holding the new shape.
        shape: Reg,
    },
}

/// A result of an [`Instr::Kernel`]: a tensor allocated before the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelOut {
    /// The register it goes to.
    pub reg: Reg,
    /// Its element type.
    pub dtype: DataType,
    /// The register holding its shape (a 1-D int64 tensor).
    pub shape: Reg,
}

/// The name of the global function a [`Instr::Call`] of `func` calls.
pub fn builtin_name(func: &str) -> String {
    format!("vm.builtin.{func}")
}

/// A named input or output: its register, dtype and shape (-1: known at run time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The name users give it (the model's input or output name).
    pub name: String,
    /// Its register.
    pub reg: Reg,
    /// Its element type.
    pub dtype: DataType,
    /// Its shape; -1 for a dimension known only at run time.
    pub shape: Vec<i64>,
}

/// A program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Code {
    /// Number of registers.
    pub num_regs: usize,
    /// The inputs, in order.
    pub inputs: Vec<Slot>,
    /// The outputs, in order.
    pub outputs: Vec<Slot>,
    /// The instructions; running starts at the first and ends past the last.
    pub instrs: Vec<Instr>,
}

const OP_RUN: u64 = 0;
const OP_CALL: u64 = 1;
const OP_JUMP_UNLESS: u64 = 2;
const OP_JUMP: u64 = 3;
const OP_MOVE: u64 = 4;
const OP_FAIL: u64 = 5;
const OP_KERNEL: u64 = 6;
const OP_VIEW: u64 = 7;
const OP_SHAPE: u64 = 8;

impl Code {
    /// Checks what does not depend on the segments: registers in range, jump targets inside
    /// the program (or just past it), distinct input registers and names.
    pub fn validate(&self) -> Result<()> {
        let reg = |r: Reg, what: &str| -> Result<()> {
            if r >= self.num_regs {
                return Err(Error::value_error(format!(
                    "VM program: {what} uses register {r}, but there are {}",
                    self.num_regs
                )));
            }
            Ok(())
        };
        for (i, s) in self.inputs.iter().enumerate() {
            reg(s.reg, &format!("input #{i} ({:?})", s.name))?;
            if self.inputs[..i]
                .iter()
                .any(|o| o.reg == s.reg || o.name == s.name)
            {
                return Err(Error::value_error(format!(
                    "VM program: input #{i} ({:?}) repeats an earlier input's name or register",
                    s.name
                )));
            }
        }
        for (i, s) in self.outputs.iter().enumerate() {
            reg(s.reg, &format!("output #{i} ({:?})", s.name))?;
        }
        let n = self.instrs.len();
        for (pc, ins) in self.instrs.iter().enumerate() {
            let what = format!("instruction {pc}");
            match ins {
                Instr::Run { args, rets, .. } | Instr::Call { args, rets, .. } => {
                    for &r in args.iter().chain(rets) {
                        reg(r, &what)?;
                    }
                }
                Instr::JumpUnless { target, .. } | Instr::Jump { target } => {
                    if let Instr::JumpUnless { cond, .. } = ins {
                        reg(*cond, &what)?;
                    }
                    if *target > n {
                        return Err(Error::value_error(format!(
                            "VM program: {what} jumps to {target}, past the end ({n})"
                        )));
                    }
                }
                Instr::Move { dst, src } => {
                    reg(*dst, &what)?;
                    reg(*src, &what)?;
                }
                Instr::Kernel { args, outs, .. } => {
                    for &r in args {
                        reg(r, &what)?;
                    }
                    for o in outs {
                        reg(o.reg, &what)?;
                        reg(o.shape, &what)?;
                    }
                }
                Instr::View { dst, src, shape } => {
                    for r in [*dst, *src, *shape] {
                        reg(r, &what)?;
                    }
                }
                Instr::Shape { dst, args, .. } => {
                    reg(*dst, &what)?;
                    for &r in args {
                        reg(r, &what)?;
                    }
                }
                Instr::Fail { .. } => {}
            }
        }
        Ok(())
    }

    /// Reads a program written by [`Code::to_bytes`], and validates it.
    pub fn from_bytes(bytes: &[u8]) -> Result<Code> {
        let mut r = ByteReader::new(bytes, "VM program");
        let magic = r.u64("magic")?;
        if magic != MAGIC {
            return Err(r.error_at(0, "the magic number is not KILNVM01"));
        }
        let num_regs = r.count("register count", 0)?;
        let inputs = read_slots(&mut r, "inputs")?;
        let outputs = read_slots(&mut r, "outputs")?;
        let n = r.count("instruction count", 8)?;
        let mut instrs = Vec::with_capacity(n);
        for pc in 0..n {
            let at = r.pos();
            let op = r.u64(&format!("opcode of instruction {pc}"))?;
            let ins = match op {
                OP_RUN => Instr::Run {
                    segment: read_index(&mut r, "segment")?,
                    args: read_list(&mut r, "arguments")?,
                    rets: read_list(&mut r, "results")?,
                },
                OP_CALL => Instr::Call {
                    func: r.string("builtin name")?,
                    args: read_list(&mut r, "arguments")?,
                    ints: {
                        let k = r.count("integer count", 8)?;
                        (0..k)
                            .map(|_| r.i64("integer attribute"))
                            .collect::<Result<_>>()?
                    },
                    rets: read_list(&mut r, "results")?,
                },
                OP_JUMP_UNLESS => Instr::JumpUnless {
                    cond: read_index(&mut r, "condition register")?,
                    target: read_index(&mut r, "jump target")?,
                },
                OP_JUMP => Instr::Jump {
                    target: read_index(&mut r, "jump target")?,
                },
                OP_MOVE => Instr::Move {
                    dst: read_index(&mut r, "destination register")?,
                    src: read_index(&mut r, "source register")?,
                },
                OP_FAIL => Instr::Fail {
                    message: r.string("failure message")?,
                },
                OP_KERNEL => Instr::Kernel {
                    func: r.string("kernel name")?,
                    args: read_list(&mut r, "arguments")?,
                    outs: {
                        let k = r.count("result count", 24)?;
                        (0..k)
                            .map(|_| {
                                Ok(KernelOut {
                                    reg: read_index(&mut r, "result register")?,
                                    dtype: read_dtype(&mut r, "result")?,
                                    shape: read_index(&mut r, "shape register")?,
                                })
                            })
                            .collect::<Result<_>>()?
                    },
                },
                OP_SHAPE => Instr::Shape {
                    dst: read_index(&mut r, "destination register")?,
                    args: read_list(&mut r, "arguments")?,
                    code: {
                        let k = r.count("shape program length", 8)?;
                        (0..k)
                            .map(|_| r.i64("shape program word"))
                            .collect::<Result<_>>()?
                    },
                },
                OP_VIEW => Instr::View {
                    dst: read_index(&mut r, "destination register")?,
                    src: read_index(&mut r, "source register")?,
                    shape: read_index(&mut r, "shape register")?,
                },
                _ => return Err(r.error_at(at, format!("unknown opcode {op} (instruction {pc})"))),
            };
            instrs.push(ins);
        }
        if r.remaining() != 0 {
            return Err(r.error_at(r.pos(), format!("{} unread bytes", r.remaining())));
        }
        let code = Code {
            num_regs,
            inputs,
            outputs,
            instrs,
        };
        code.validate()?;
        Ok(code)
    }

    /// The program's bytes. (Feature `compiler`.)
    #[cfg(feature = "compiler")]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_u64(&mut out, MAGIC);
        put_u64(&mut out, self.num_regs as u64);
        for slots in [&self.inputs, &self.outputs] {
            put_u64(&mut out, slots.len() as u64);
            for s in slots {
                put_string(&mut out, &s.name);
                put_u64(&mut out, s.reg as u64);
                put_string(&mut out, &s.dtype.to_string());
                put_u64(&mut out, s.shape.len() as u64);
                for &d in &s.shape {
                    put_u64(&mut out, d as u64);
                }
            }
        }
        let list = |out: &mut Vec<u8>, v: &[usize]| {
            put_u64(out, v.len() as u64);
            for &x in v {
                put_u64(out, x as u64);
            }
        };
        put_u64(&mut out, self.instrs.len() as u64);
        for ins in &self.instrs {
            match ins {
                Instr::Run {
                    segment,
                    args,
                    rets,
                } => {
                    put_u64(&mut out, OP_RUN);
                    put_u64(&mut out, *segment as u64);
                    list(&mut out, args);
                    list(&mut out, rets);
                }
                Instr::Call {
                    func,
                    args,
                    ints,
                    rets,
                } => {
                    put_u64(&mut out, OP_CALL);
                    put_string(&mut out, func);
                    list(&mut out, args);
                    put_u64(&mut out, ints.len() as u64);
                    for &v in ints {
                        put_u64(&mut out, v as u64);
                    }
                    list(&mut out, rets);
                }
                Instr::JumpUnless { cond, target } => {
                    put_u64(&mut out, OP_JUMP_UNLESS);
                    put_u64(&mut out, *cond as u64);
                    put_u64(&mut out, *target as u64);
                }
                Instr::Jump { target } => {
                    put_u64(&mut out, OP_JUMP);
                    put_u64(&mut out, *target as u64);
                }
                Instr::Move { dst, src } => {
                    put_u64(&mut out, OP_MOVE);
                    put_u64(&mut out, *dst as u64);
                    put_u64(&mut out, *src as u64);
                }
                Instr::Fail { message } => {
                    put_u64(&mut out, OP_FAIL);
                    put_string(&mut out, message);
                }
                Instr::Kernel { func, args, outs } => {
                    put_u64(&mut out, OP_KERNEL);
                    put_string(&mut out, func);
                    list(&mut out, args);
                    put_u64(&mut out, outs.len() as u64);
                    for o in outs {
                        put_u64(&mut out, o.reg as u64);
                        put_string(&mut out, &o.dtype.to_string());
                        put_u64(&mut out, o.shape as u64);
                    }
                }
                Instr::Shape { dst, args, code } => {
                    put_u64(&mut out, OP_SHAPE);
                    put_u64(&mut out, *dst as u64);
                    list(&mut out, args);
                    put_u64(&mut out, code.len() as u64);
                    for &w in code {
                        put_u64(&mut out, w as u64);
                    }
                }
                Instr::View { dst, src, shape } => {
                    put_u64(&mut out, OP_VIEW);
                    for r in [dst, src, shape] {
                        put_u64(&mut out, *r as u64);
                    }
                }
            }
        }
        out
    }
}

/// The program as text, one instruction per line (`kiln inspect` prints it):
///
/// ```text
/// inputs: x = r0 float32[2, 3]
/// 0: r1, r2 = run segment 0 (r0)
/// 1: jump to 4 unless r2
/// ...
/// outputs: y = r5 float32[2, 3]
/// ```
/// (Feature `compiler`.)
#[cfg(feature = "compiler")]
impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let regs = |v: &[Reg]| -> String {
            v.iter()
                .map(|r| format!("r{r}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let slots = |v: &[Slot]| -> String {
            v.iter()
                .map(|s| format!("{} = r{} {}{:?}", s.name, s.reg, s.dtype, s.shape))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(f, "inputs: {}", slots(&self.inputs))?;
        for (pc, ins) in self.instrs.iter().enumerate() {
            write!(f, "{pc}: ")?;
            match ins {
                Instr::Run {
                    segment,
                    args,
                    rets,
                } => writeln!(f, "{} = run segment {segment} ({})", regs(rets), regs(args))?,
                Instr::Call {
                    func,
                    args,
                    ints,
                    rets,
                } => {
                    let mut all: Vec<String> = args.iter().map(|r| format!("r{r}")).collect();
                    all.extend(ints.iter().map(|v| v.to_string()));
                    writeln!(f, "{} = call {func}({})", regs(rets), all.join(", "))?
                }
                Instr::JumpUnless { cond, target } => {
                    writeln!(f, "jump to {target} unless r{cond}")?
                }
                Instr::Jump { target } => writeln!(f, "jump to {target}")?,
                Instr::Move { dst, src } => writeln!(f, "r{dst} = r{src}")?,
                Instr::Fail { message } => writeln!(f, "fail {message:?}")?,
                Instr::Kernel { func, args, outs } => {
                    let outs: Vec<String> = outs
                        .iter()
                        .map(|o| format!("r{} {}[r{}]", o.reg, o.dtype, o.shape))
                        .collect();
                    writeln!(f, "{} = kernel {func}({})", outs.join(", "), regs(args))?
                }
                Instr::View { dst, src, shape } => {
                    writeln!(f, "r{dst} = view r{src} as shape r{shape}")?
                }
                Instr::Shape { dst, args, code } => {
                    writeln!(f, "r{dst} = shape of ({}) by {code:?}", regs(args))?
                }
            }
        }
        write!(f, "outputs: {}", slots(&self.outputs))
    }
}

/// An index (register, segment, jump target) that fits in memory.
fn read_index(r: &mut ByteReader<'_>, field: &str) -> Result<usize> {
    let at = r.pos();
    let v = r.u64(field)?;
    usize::try_from(v)
        .ok()
        .filter(|&v| v < (1 << 32))
        .ok_or_else(|| r.error_at(at, format!("{field} {v} is out of range")))
}

fn read_list(r: &mut ByteReader<'_>, field: &str) -> Result<Vec<usize>> {
    let n = r.count(&format!("number of {field}"), 8)?;
    (0..n).map(|_| read_index(r, field)).collect()
}

/// A dtype written as its name.
fn read_dtype(r: &mut ByteReader<'_>, what: &str) -> Result<DataType> {
    let at = r.pos();
    let s = r.string(&format!("dtype of {what}"))?;
    s.parse()
        .map_err(|_| r.error_at(at, format!("dtype {s:?} of {what} is not a dtype")))
}

fn read_slots(r: &mut ByteReader<'_>, field: &str) -> Result<Vec<Slot>> {
    let n = r.count(&format!("number of {field}"), 8)?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let what = format!("{field}[{i}]");
        let name = r.string(&format!("name of {what}"))?;
        let reg = read_index(r, &format!("register of {what}"))?;
        let dtype = read_dtype(r, &what)?;
        let ndim = r.count(&format!("rank of {what}"), 8)?;
        let mut shape = Vec::with_capacity(ndim);
        for _ in 0..ndim {
            let at = r.pos();
            let d = r.i64(&format!("dimension of {what}"))?;
            if d < -1 {
                return Err(r.error_at(at, format!("dimension {d} of {what} is negative")));
            }
            shape.push(d);
        }
        out.push(Slot {
            name,
            reg,
            dtype,
            shape,
        });
    }
    Ok(out)
}

#[cfg(all(test, feature = "compiler"))]
mod tests {
    use super::*;

    fn sample() -> Code {
        Code {
            num_regs: 4,
            inputs: vec![Slot {
                name: "x".into(),
                reg: 0,
                dtype: DataType::float(32),
                shape: vec![2, 3],
            }],
            outputs: vec![Slot {
                name: "y".into(),
                reg: 3,
                dtype: DataType::int(64),
                shape: vec![-1, 3],
            }],
            instrs: vec![
                Instr::Run {
                    segment: 0,
                    args: vec![0],
                    rets: vec![1, 2],
                },
                Instr::JumpUnless { cond: 1, target: 4 },
                Instr::Call {
                    func: "non_zero".into(),
                    args: vec![2],
                    ints: vec![-3, 7],
                    rets: vec![3],
                },
                Instr::Jump { target: 5 },
                Instr::Move { dst: 3, src: 2 },
                Instr::Fail {
                    message: "no code".into(),
                },
                Instr::Kernel {
                    func: "k0".into(),
                    args: vec![0, 1],
                    outs: vec![KernelOut {
                        reg: 2,
                        dtype: DataType::float(32),
                        shape: 1,
                    }],
                },
                Instr::View {
                    dst: 3,
                    src: 2,
                    shape: 1,
                },
                Instr::Shape {
                    dst: 1,
                    args: vec![0],
                    code: vec![1, 0, 1, 0, 2, 4, 12],
                },
            ],
        }
    }

    #[test]
    fn programs_round_trip_through_bytes() {
        let c = sample();
        assert_eq!(Code::from_bytes(&c.to_bytes()).unwrap(), c);
    }

    #[test]
    fn damaged_programs_are_refused_with_the_offset() {
        let bytes = sample().to_bytes();
        for cut in [0, 7, 8, 30, bytes.len() - 1] {
            let e = Code::from_bytes(&bytes[..cut]).unwrap_err().to_string();
            assert!(e.contains("byte offset"), "{cut}: {e}");
        }
        let mut c = sample();
        c.instrs[1] = Instr::JumpUnless { cond: 9, target: 1 };
        let e = Code::from_bytes(&c.to_bytes()).unwrap_err().to_string();
        assert!(e.contains("register 9"), "{e}");
        let mut c = sample();
        c.instrs[3] = Instr::Jump { target: 99 };
        let e = Code::from_bytes(&c.to_bytes()).unwrap_err().to_string();
        assert!(e.contains("jumps to 99"), "{e}");
    }
}
