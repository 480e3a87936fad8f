//! A reference interpreter for lowered `PrimFunc`s: runs a function over multi-dimensional
//! buffers held as Rust vectors (floats as `f64`, rounded to `f32` for `float32`; integers as
//! `i64`). Loops of every kind run serially. Scalars only (no ramps or broadcasts).

#![allow(dead_code)]

use kiln_tir::{BinOp, Buffer, DataTypeExt, ExprKind, PrimExpr, PrimFunc, Stmt, StmtKind, Var};
use std::collections::HashMap;

/// Buffer contents.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// Floating-point elements.
    F(Vec<f64>),
    /// Integer (and bool) elements.
    I(Vec<i64>),
}

/// An argument: shape and contents (row-major).
#[derive(Clone, Debug)]
pub struct NdArray {
    /// The extents.
    pub shape: Vec<i64>,
    /// The elements.
    pub data: Data,
}

impl NdArray {
    /// A `float32` array from values.
    pub fn f32(shape: &[i64], v: &[f32]) -> NdArray {
        assert_eq!(shape.iter().product::<i64>() as usize, v.len());
        NdArray {
            shape: shape.to_vec(),
            data: Data::F(v.iter().map(|&x| x as f64).collect()),
        }
    }

    /// A zero `float32` array.
    pub fn zeros(shape: &[i64]) -> NdArray {
        NdArray {
            shape: shape.to_vec(),
            data: Data::F(vec![0.0; shape.iter().product::<i64>() as usize]),
        }
    }

    /// The contents as `f32`.
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            Data::F(v) => v.iter().map(|&x| x as f32).collect(),
            Data::I(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Val {
    I(i64),
    F(f64),
}

impl Val {
    fn i(self) -> i64 {
        match self {
            Val::I(v) => v,
            Val::F(v) => v as i64,
        }
    }
    fn f(self) -> f64 {
        match self {
            Val::I(v) => v as f64,
            Val::F(v) => v,
        }
    }
}

struct Interp {
    vars: HashMap<Var, Val>,
    mem: Vec<Data>,
    data_of: HashMap<Var, usize>,
    steps: u64,
}

/// Runs `f` on `args` (one per parameter, in order) and returns them after the call.
pub fn run(f: &PrimFunc, mut args: Vec<NdArray>) -> Result<Vec<NdArray>, String> {
    let mut it = Interp {
        vars: HashMap::new(),
        mem: Vec::new(),
        data_of: HashMap::new(),
        steps: 0,
    };
    if args.len() != f.params().len() {
        return Err(format!(
            "{} arguments for {} parameters",
            args.len(),
            f.params().len()
        ));
    }
    for (p, a) in f.params().iter().zip(&args) {
        let buf = f
            .buffer_map()
            .get(p)
            .ok_or_else(|| format!("parameter {} has no buffer", p.name()))?;
        if buf.ndim() != a.shape.len() {
            return Err(format!(
                "buffer {}: rank {} vs {}",
                buf.name(),
                buf.ndim(),
                a.shape.len()
            ));
        }
        for (d, &n) in buf.shape().iter().zip(&a.shape) {
            match d.kind() {
                ExprKind::Var(v) => {
                    it.vars.insert(v, Val::I(n));
                }
                _ => {
                    let want = it.expr(d)?.i();
                    if want != n {
                        return Err(format!("buffer {}: extent {want} vs {n}", buf.name()));
                    }
                }
            }
        }
        it.data_of.insert(buf.data().clone(), it.mem.len());
        it.mem.push(a.data.clone());
    }
    it.stmt(f.body())?;
    for (k, a) in args.iter_mut().enumerate() {
        a.data = it.mem[k].clone();
    }
    Ok(args)
}

fn round(t: kiln_tir::DataType, v: f64) -> f64 {
    if t.bits() == 32 {
        v as f32 as f64
    } else {
        v
    }
}

impl Interp {
    fn offset(&mut self, b: &Buffer, indices: &[PrimExpr]) -> Result<usize, String> {
        let mut off = 0i64;
        let idx: Vec<i64> = indices
            .iter()
            .map(|i| self.expr(i).map(Val::i))
            .collect::<Result<_, _>>()?;
        if b.strides().is_empty() {
            for (k, i) in idx.iter().enumerate() {
                let n = self.expr(&b.shape()[k])?.i();
                if *i < 0 || *i >= n {
                    return Err(format!(
                        "{}: index {i} out of [0, {n}) in dim {k}",
                        b.name()
                    ));
                }
                off = off * n + i;
            }
        } else {
            for (k, i) in idx.iter().enumerate() {
                off += i * self.expr(&b.strides()[k])?.i();
            }
        }
        off += self.expr(b.elem_offset())?.i();
        let slot = *self
            .data_of
            .get(b.data())
            .ok_or_else(|| format!("buffer {} has no memory", b.name()))?;
        let len = match &self.mem[slot] {
            Data::F(v) => v.len(),
            Data::I(v) => v.len(),
        };
        if off < 0 || off as usize >= len {
            return Err(format!("{}: offset {off} out of {len}", b.name()));
        }
        Ok(off as usize)
    }

    fn expr(&mut self, e: &PrimExpr) -> Result<Val, String> {
        let t = e.dtype();
        Ok(match e.kind() {
            ExprKind::IntImm(v) => Val::I(v),
            ExprKind::FloatImm(v) => Val::F(v),
            ExprKind::Var(v) => *self
                .vars
                .get(&v)
                .ok_or_else(|| format!("unbound variable {}", v.name()))?,
            ExprKind::Binary(op, a, b) => {
                let (x, y) = (self.expr(a)?, self.expr(b)?);
                let float = a.dtype().is_floating();
                binary(op, x, y, float, t)?
            }
            ExprKind::Not(a) => Val::I((self.expr(a)?.i() == 0) as i64),
            ExprKind::Cast(a) => {
                let v = self.expr(a)?;
                if t.is_floating() {
                    Val::F(round(t, v.f()))
                } else if t.is_bool() {
                    Val::I((v.f() != 0.0) as i64)
                } else {
                    Val::I(t.wrap_int(v.f() as i64))
                }
            }
            ExprKind::Select { cond, t, f } => {
                let (c, a, b) = (self.expr(cond)?, self.expr(t)?, self.expr(f)?);
                if c.i() != 0 {
                    a
                } else {
                    b
                }
            }
            ExprKind::Let { var, value, body } => {
                let v = self.expr(value)?;
                self.vars.insert(var.clone(), v);
                self.expr(body)?
            }
            ExprKind::BufferLoad { buffer, indices } => {
                let off = self.offset(buffer, indices)?;
                let slot = self.data_of[buffer.data()];
                match &self.mem[slot] {
                    Data::F(v) => Val::F(v[off]),
                    Data::I(v) => Val::I(v[off]),
                }
            }
            ExprKind::Call { op, args } => self.call(op, args, t)?,
            other => return Err(format!("unsupported expression {other:?}")),
        })
    }

    fn call(&mut self, op: &str, args: &[PrimExpr], t: kiln_tir::DataType) -> Result<Val, String> {
        if op == kiln_tir::op::IF_THEN_ELSE {
            let c = self.expr(&args[0])?.i();
            return self.expr(&args[if c != 0 { 1 } else { 2 }]);
        }
        if op == kiln_tir::op::LIKELY {
            return self.expr(&args[0]);
        }
        let x = self.expr(&args[0])?.f();
        let v = match op {
            "tir.exp" => x.exp(),
            "tir.log" => x.ln(),
            "tir.sqrt" => x.sqrt(),
            "tir.tanh" => x.tanh(),
            "tir.fabs" => x.abs(),
            "tir.floor" => x.floor(),
            "tir.ceil" => x.ceil(),
            "tir.sigmoid" => 1.0 / (1.0 + (-x).exp()),
            "tir.pow" => x.powf(self.expr(&args[1])?.f()),
            _ => return Err(format!("unsupported call {op}")),
        };
        Ok(Val::F(round(t, v)))
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), String> {
        self.steps += 1;
        if self.steps > 200_000_000 {
            return Err("step limit".into());
        }
        match s.kind() {
            StmtKind::For(f) => {
                let min = self.expr(&f.min)?.i();
                let ext = self.expr(&f.extent)?.i();
                for i in min..min + ext {
                    self.vars.insert(f.loop_var.clone(), Val::I(i));
                    self.stmt(&f.body)?;
                }
            }
            StmtKind::BufferStore(st) => {
                let v = self.expr(&st.value)?;
                let off = self.offset(&st.buffer, &st.indices)?;
                let slot = self.data_of[st.buffer.data()];
                let t = st.buffer.dtype();
                match &mut self.mem[slot] {
                    Data::F(m) => m[off] = round(t, v.f()),
                    Data::I(m) => m[off] = v.i(),
                }
            }
            StmtKind::Allocate(a) => {
                let mut n = 1i64;
                for e in a.extents.iter() {
                    n *= self.expr(e)?.i();
                }
                let data = if a.dtype.is_floating() {
                    Data::F(vec![f64::NAN; n as usize])
                } else {
                    Data::I(vec![0; n as usize])
                };
                self.data_of.insert(a.buffer_var.clone(), self.mem.len());
                self.mem.push(data);
                self.stmt(&a.body)?;
            }
            StmtKind::DeclBuffer(d) => self.stmt(&d.body)?,
            StmtKind::IfThenElse(i) => {
                if self.expr(&i.condition)?.i() != 0 {
                    self.stmt(&i.then_case)?;
                } else if let Some(e) = &i.else_case {
                    self.stmt(e)?;
                }
            }
            StmtKind::LetStmt(l) => {
                let v = self.expr(&l.value)?;
                self.vars.insert(l.var.clone(), v);
                self.stmt(&l.body)?;
            }
            StmtKind::Seq(q) => {
                for x in q.seq.iter() {
                    self.stmt(x)?;
                }
            }
            StmtKind::AttrStmt(a) => self.stmt(&a.body)?,
            StmtKind::Assert(a) => {
                if self.expr(&a.condition)?.i() == 0 {
                    return Err(format!("assertion failed: {}", a.message));
                }
                self.stmt(&a.body)?;
            }
            StmtKind::Evaluate(e) => {
                self.expr(&e.value)?;
            }
        }
        Ok(())
    }
}

fn binary(op: BinOp, x: Val, y: Val, float: bool, t: kiln_tir::DataType) -> Result<Val, String> {
    use BinOp::*;
    let b = |v: bool| Val::I(v as i64);
    Ok(if float {
        let (a, c) = (x.f(), y.f());
        match op {
            Add => Val::F(round(t, a + c)),
            Sub => Val::F(round(t, a - c)),
            Mul => Val::F(round(t, a * c)),
            Div => Val::F(round(t, a / c)),
            Min => Val::F(a.min(c)),
            Max => Val::F(a.max(c)),
            Eq => b(a == c),
            Ne => b(a != c),
            Lt => b(a < c),
            Le => b(a <= c),
            Gt => b(a > c),
            Ge => b(a >= c),
            _ => return Err(format!("unsupported float op {op:?}")),
        }
    } else {
        let (a, c) = (x.i(), y.i());
        let nz = || {
            if c == 0 {
                Err("division by zero".to_string())
            } else {
                Ok(())
            }
        };
        match op {
            Add => Val::I(a.wrapping_add(c)),
            Sub => Val::I(a.wrapping_sub(c)),
            Mul => Val::I(a.wrapping_mul(c)),
            Div => {
                nz()?;
                Val::I(a / c)
            }
            Mod => {
                nz()?;
                Val::I(a % c)
            }
            FloorDiv => {
                nz()?;
                Val::I(a.div_euclid(c) - if c < 0 && a.rem_euclid(c) != 0 { 1 } else { 0 })
            }
            FloorMod => {
                nz()?;
                let q = a.div_euclid(c) - if c < 0 && a.rem_euclid(c) != 0 { 1 } else { 0 };
                Val::I(a - q * c)
            }
            Min => Val::I(a.min(c)),
            Max => Val::I(a.max(c)),
            Eq => b(a == c),
            Ne => b(a != c),
            Lt => b(a < c),
            Le => b(a <= c),
            Gt => b(a > c),
            Ge => b(a >= c),
            And => b(a != 0 && c != 0),
            Or => b(a != 0 || c != 0),
        }
    })
}
