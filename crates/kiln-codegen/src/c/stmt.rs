//! Statements to C statements: loops (parallel ones go to [`super::parallel`]), flat buffer
//! stores (vector stores lane by lane, contiguous ones as `memcpy`), allocations as 64-byte
//! aligned local arrays, conditionals, lets (each binding gets a fresh C name), asserts, and
//! evaluated calls (`tir.ret(v)` returns `v`).

use super::CodeGenC;
use crate::lower_common::{constant_element_count, contiguous_base};
use kiln_ffi::{Error, Result};
use kiln_tir::op::builtin;
use kiln_tir::stmt::{AllocateObj, BufferStoreObj, ForObj};
use kiln_tir::{DataTypeExt, ExprKind, ForKind, PrimExpr, Stmt, StmtKind, Var};

/// True for expressions cheap and pure enough to repeat in a loop condition.
fn is_simple(e: &PrimExpr) -> bool {
    matches!(e.kind(), ExprKind::IntImm(_) | ExprKind::Var(_))
}

impl CodeGenC {
    /// Emits `s` into the current body.
    pub fn stmt(&mut self, s: &Stmt) -> Result<()> {
        match s.kind() {
            StmtKind::For(f) => self.for_loop(f),
            StmtKind::BufferStore(st) => self.buffer_store(st),
            StmtKind::Allocate(a) => self.allocate(a),
            StmtKind::DeclBuffer(d) => self.stmt(&d.body),
            StmtKind::IfThenElse(n) if n.condition.dtype().lanes() > 1 => self.predicated(n),
            StmtKind::IfThenElse(n) => {
                let c = self.expr(&n.condition)?;
                self.line(format!("if ({c}) {{"));
                self.block(&n.then_case)?;
                if let Some(e) = &n.else_case {
                    self.line("} else {");
                    self.block(e)?;
                }
                self.line("}");
                Ok(())
            }
            StmtKind::LetStmt(l) => {
                let v = self.expr(&l.value)?;
                let ct = self.ctype(l.var.dtype())?;
                let (name, prev) = self.bind(&l.var);
                self.line(format!("{ct} {name} = {v};"));
                self.line(format!("(void){name};"));
                let r = self.stmt(&l.body);
                self.unbind(&l.var, prev);
                r
            }
            StmtKind::Seq(seq) => {
                for s in seq.seq.iter() {
                    self.stmt(s)?;
                }
                Ok(())
            }
            StmtKind::AttrStmt(a) => self.stmt(&a.body),
            StmtKind::Assert(_) if self.dialect.is_device() => Err(Error::value_error(format!(
                "{} code generation of `{}`: asserts are not supported in kernels",
                self.dialect.name(),
                self.func_name
            ))),
            StmtKind::Assert(a) => self.assert_stmt(a),
            StmtKind::Evaluate(e) => {
                if let ExprKind::Call { op, args } = e.value.kind() {
                    if op == builtin::RET {
                        let v = match args.first() {
                            Some(a) => self.expr(a)?,
                            None => "0".to_string(),
                        };
                        self.line(format!("return {v};"));
                        return Ok(());
                    }
                    if op == builtin::TVM_THROW_LAST_ERROR {
                        self.line("return -1;");
                        return Ok(());
                    }
                }
                if e.value.is_const() {
                    return Ok(());
                }
                if self.dialect.is_device() {
                    let v = self.expr(&e.value)?;
                    self.line(format!("{v};"));
                    return Ok(());
                }
                let v = self.expr(&e.value)?;
                self.line(format!("(void){v};"));
                Ok(())
            }
        }
    }

    /// `s` one level deeper.
    /// An `if` with a per-lane condition (VectorizeLoop's predicate over vector stores): a
    /// loop over the lanes storing those where it holds, each lane's loads its own.
    fn predicated(&mut self, n: &kiln_tir::stmt::IfThenElseObj) -> Result<()> {
        let lanes = n.condition.dtype().lanes();
        let k = Var::int32("lane");
        let (name, prev) = self.bind(&k);
        let scalar = |e: &PrimExpr| lane_of(e, &k);
        let c = self.expr(&scalar(&n.condition)?)?;
        self.line(format!(
            "for (int32_t {name} = 0; {name} < {lanes}; ++{name}) {{"
        ));
        self.indent += 1;
        self.line(format!("if ({c}) {{"));
        let stores: Vec<&Stmt> = match n.then_case.kind() {
            StmtKind::Seq(q) => q.seq.iter().collect(),
            _ => vec![&n.then_case],
        };
        for st in stores {
            let StmtKind::BufferStore(b) = st.kind() else {
                return Err(Error::value_error(format!(
                    "c codegen: a per-lane `if` guards `{st}`, not vector stores"
                )));
            };
            let idx: Result<Vec<_>> = b.indices.iter().map(&scalar).collect();
            let one = Stmt::buffer_store_raw(b.buffer.clone(), scalar(&b.value)?, idx?);
            self.block(&one)?;
        }
        self.line("}");
        self.indent -= 1;
        self.line("}");
        self.unbind(&k, prev);
        Ok(())
    }

    pub(crate) fn block(&mut self, s: &Stmt) -> Result<()> {
        self.indent += 1;
        let r = self.stmt(s);
        self.indent -= 1;
        r
    }

    fn for_loop(&mut self, f: &ForObj) -> Result<()> {
        if f.kind == ForKind::Parallel && self.dialect.is_device() {
            return Err(Error::value_error(format!(
                "{} code generation of `{}`: loop `{}` is parallel, which a kernel cannot run \
                 (bind it to a thread axis instead)",
                self.dialect.name(),
                self.func_name,
                f.loop_var.name()
            )));
        }
        if f.kind == ForKind::Parallel && !self.in_parallel {
            return self.parallel_for(f);
        }
        if f.kind == ForKind::ThreadBinding {
            return Err(Error::value_error(format!(
                "loop `{}` is bound to a GPU thread axis: it cannot run on the host",
                f.loop_var.name()
            )));
        }
        let ct = self.ctype(f.loop_var.dtype())?;
        let min = self.expr(&f.min)?;
        let ext = self.expr(&f.extent)?;
        let (name, prev) = self.bind(&f.loop_var);
        if f.min.is_const_int(0) && is_simple(&f.extent) {
            self.line(format!(
                "for ({ct} {name} = 0; {name} < {ext}; ++{name}) {{"
            ));
        } else {
            let end = self.temp("end");
            self.line(format!(
                "for ({ct} {name} = {min}, {end} = ({ct})({min} + {ext}); {name} < {end}; \
                 ++{name}) {{"
            ));
        }
        let r = self.block(&f.body);
        self.line("}");
        self.unbind(&f.loop_var, prev);
        r
    }

    fn buffer_store(&mut self, st: &BufferStoreObj) -> Result<()> {
        if st.indices.len() != 1 {
            return Err(Error::value_error(format!(
                "c codegen: store to `{}` has {} indices; run StorageFlatten first",
                st.buffer.name(),
                st.indices.len()
            )));
        }
        let idx = &st.indices[0];
        let ptr = self.buffer_ptr(&st.buffer)?;
        let t = st.value.dtype();
        let v = self.expr(&st.value)?;
        let buffer_vector = st.buffer.dtype().is_vector();
        if t.lanes() <= 1 || buffer_vector {
            let i = self.expr(idx)?;
            self.line(format!("{ptr}[{i}] = {v};"));
            return Ok(());
        }
        let vt = self.ctype(t)?;
        let tmp = self.temp("val");
        if let Some(base) = contiguous_base(idx) {
            let b = self.expr(&base)?;
            self.line(format!(
                "{{ {vt} {tmp} = {v}; memcpy(&{ptr}[{b}], &{tmp}, sizeof({tmp})); }}"
            ));
            return Ok(());
        }
        let it = self.ctype(idx.dtype())?;
        let i = self.expr(idx)?;
        let (ti, k) = (self.temp("idx"), self.temp("k"));
        self.line(format!(
            "{{ {vt} {tmp} = {v}; {it} {ti} = {i}; for (int {k} = 0; {k} < {}; ++{k}) \
             {ptr}[{ti}.v[{k}]] = {tmp}.v[{k}]; }}",
            t.lanes()
        ));
        Ok(())
    }

    fn allocate(&mut self, a: &AllocateObj) -> Result<()> {
        if self.dialect.is_device() {
            return self.device_allocate(a);
        }
        let et = self.ctype(a.dtype)?;
        let mut count = String::new();
        for e in a.extents.iter() {
            let x = self.expr(e)?;
            if !count.is_empty() {
                count.push_str(" * ");
            }
            count.push_str(&format!("(int64_t)({x})"));
        }
        let n = match constant_element_count(a) {
            Some(c) => c.max(1).to_string(),
            None => count,
        };
        let arr = self.temp("alloc");
        self.line(format!("{et} {arr}[{n}] __attribute__((aligned(64)));"));
        let (name, prev) = self.bind(&a.buffer_var);
        self.line(format!("void* {name} = (void*){arr};"));
        self.line(format!("(void){name};"));
        let r = self.stmt(&a.body);
        self.unbind(&a.buffer_var, prev);
        r
    }
}

/// Lane `k` of vector expression `e` as a scalar expression (how predicated vector code runs
/// lane by lane in C).
pub(crate) fn lane_of(e: &PrimExpr, k: &Var) -> Result<PrimExpr> {
    kiln_tir::transform::vectorize_loop::lane(e, &k.to_expr())
        .ok_or_else(|| Error::value_error(format!("c codegen: no per-lane form of `{e}`")))
}
