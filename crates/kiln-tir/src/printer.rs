//! A readable, TVMScript-like text form of the IR, used by `Display`/`Debug` of every handle
//! and by the `tir.AsText` global:
//!
//! ```text
//! @T.prim_func
//! def add(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
//!     T.func_attr({"global_symbol": "add"})
//!     for i in range(0, 128):
//!         C[i] = A[i] + B[i]
//! ```
//!
//! Names come from name hints; two different variables (or buffers) with one hint are told
//! apart with a suffix (`i`, `i_1`). Parentheses follow Python's precedence and the tree's
//! shape (`a + (b + c)` keeps its parentheses).

use crate::buffer::Buffer;
use crate::dtype::DataTypeExt;
use crate::expr::{BinOp, ExprKind, PrimExpr, Var};
use crate::function::{IRModule, PrimFunc};
use crate::node::ptr_key;
use crate::stmt::{ForKind, Stmt, StmtKind};
use kiln_ffi::{AnyView, Array, DataType, Map, TryFromAny};
use std::collections::{HashMap, HashSet};

/// The text of an expression.
pub fn expr_to_text(e: &PrimExpr) -> String {
    Printer::default().expr(e).0
}

/// The text of a statement.
pub fn stmt_to_text(s: &Stmt) -> String {
    let mut p = Printer::default();
    p.stmt(s);
    p.finish()
}

/// The text of a buffer declaration: `A = T.Buffer((128,), "float32")`.
pub fn buffer_decl_text(b: &Buffer) -> String {
    let mut p = Printer::default();
    let name = p.buffer_name(b);
    format!("{name} = {}", p.buffer_type(b))
}

/// The text of a function, named by its `global_symbol` or else `default_name`.
pub fn func_to_text(f: &PrimFunc, default_name: &str) -> String {
    let mut p = Printer::default();
    p.func(f, default_name);
    p.finish()
}

/// The text of a module.
pub fn module_to_text(m: &IRModule) -> String {
    let mut p = Printer::default();
    p.line("@I.ir_module");
    p.line("class Module:");
    p.indent += 1;
    for (name, f) in m.functions().iter() {
        p.func(f, name);
    }
    p.finish()
}

/// The text of any value: IR nodes as above, other values as `kiln-ffi` prints them.
pub fn any_to_text(v: &AnyView<'_>) -> String {
    if let Some(e) = PrimExpr::from_any_strict(v) {
        return expr_to_text(&e);
    }
    if let Some(s) = Stmt::try_from_view(v) {
        return stmt_to_text(&s);
    }
    if let Some(f) = PrimFunc::try_from_view(v) {
        return func_to_text(&f, "main");
    }
    if let Some(m) = IRModule::try_from_view(v) {
        return module_to_text(&m);
    }
    if let Some(b) = Buffer::try_from_view(v) {
        return buffer_decl_text(&b);
    }
    Printer::default().value(v)
}

// Python precedence levels.
const P_OR: u8 = 1;
const P_AND: u8 = 2;
const P_NOT: u8 = 3;
const P_CMP: u8 = 4;
const P_ADD: u8 = 5;
const P_MUL: u8 = 6;
const P_UNARY: u8 = 7;
const P_ATOM: u8 = 8;

#[derive(Default)]
struct Printer {
    out: String,
    indent: usize,
    names: HashMap<usize, String>,
    used: HashSet<String>,
}

fn dtype_str(t: DataType) -> String {
    t.to_string()
}

fn float_text(v: f64) -> String {
    if v.is_nan() {
        "\"nan\"".into()
    } else if v.is_infinite() {
        if v > 0.0 { "\"inf\"" } else { "\"-inf\"" }.into()
    } else {
        format!("{v:?}")
    }
}

impl Printer {
    fn finish(mut self) -> String {
        while self.out.ends_with('\n') {
            self.out.pop();
        }
        self.out
    }

    fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn fresh(&mut self, hint: &str) -> String {
        let base = if hint.is_empty() { "v" } else { hint };
        let mut name = base.to_string();
        let mut k = 1;
        while self.used.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.used.insert(name.clone());
        name
    }

    fn var_name(&mut self, v: &Var) -> String {
        let key = ptr_key(v.object());
        if let Some(n) = self.names.get(&key) {
            return n.clone();
        }
        let n = self.fresh(v.name());
        self.names.insert(key, n.clone());
        n
    }

    fn buffer_name(&mut self, b: &Buffer) -> String {
        let key = ptr_key(b.object());
        if let Some(n) = self.names.get(&key) {
            return n.clone();
        }
        let n = self.fresh(b.name());
        self.names.insert(key, n.clone());
        n
    }

    fn args(&mut self, args: &[PrimExpr]) -> String {
        args.iter()
            .map(|a| self.expr(a).0)
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn wrap(&mut self, e: &PrimExpr, min_prec: u8) -> String {
        let (s, p) = self.expr(e);
        if p < min_prec {
            format!("({s})")
        } else {
            s
        }
    }

    fn expr(&mut self, e: &PrimExpr) -> (String, u8) {
        let t = e.dtype();
        match e.kind() {
            ExprKind::IntImm(v) => {
                if t.is_bool() {
                    ((if v != 0 { "True" } else { "False" }).into(), P_ATOM)
                } else if t == DataType::int(32) {
                    (v.to_string(), if v < 0 { P_UNARY } else { P_ATOM })
                } else if t.is_uint() && t.bits() == 64 {
                    (format!("T.uint64({})", v as u64), P_ATOM)
                } else {
                    (format!("T.{}({v})", dtype_str(t)), P_ATOM)
                }
            }
            ExprKind::FloatImm(v) => (format!("T.{}({})", dtype_str(t), float_text(v)), P_ATOM),
            ExprKind::StringImm(s) => (format!("{s:?}"), P_ATOM),
            ExprKind::Var(v) => (self.var_name(&v), P_ATOM),
            ExprKind::Binary(op, a, b) => self.binary(op, a, b, t),
            ExprKind::Not(a) => (format!("not {}", self.wrap(a, P_NOT)), P_NOT),
            ExprKind::Cast(v) => (
                format!("T.Cast(\"{}\", {})", dtype_str(t), self.expr(v).0),
                P_ATOM,
            ),
            ExprKind::Select { cond, t, f } => (
                format!(
                    "T.Select({}, {}, {})",
                    self.expr(cond).0,
                    self.expr(t).0,
                    self.expr(f).0
                ),
                P_ATOM,
            ),
            ExprKind::Let { var, value, body } => {
                let value = self.expr(value).0;
                let name = self.var_name(var);
                (
                    format!("T.Let({}, where={{{name}: {value}}})", self.expr(body).0),
                    P_ATOM,
                )
            }
            ExprKind::BufferLoad { buffer, indices } => {
                let name = self.buffer_name(buffer);
                (format!("{name}[{}]", self.args(indices)), P_ATOM)
            }
            ExprKind::Ramp {
                base,
                stride,
                lanes,
            } => (
                format!(
                    "T.Ramp({}, {}, {lanes})",
                    self.expr(base).0,
                    self.expr(stride).0
                ),
                P_ATOM,
            ),
            ExprKind::Broadcast { value, lanes } => (
                format!("T.Broadcast({}, {lanes})", self.expr(value).0),
                P_ATOM,
            ),
            ExprKind::Call { op, args } => {
                let short = op.strip_prefix("tir.").unwrap_or(op);
                let typed_first = matches!(
                    short,
                    "call_extern"
                        | "call_pure_extern"
                        | "call_llvm_intrin"
                        | "call_llvm_pure_intrin"
                        | "reinterpret"
                );
                let mut text = if op.starts_with("tir.") {
                    format!("T.{short}(")
                } else {
                    format!("T.call_op({op:?}, ")
                };
                if typed_first {
                    text.push_str(&format!("\"{}\", ", dtype_str(t)));
                }
                text.push_str(&self.args(args));
                if text.ends_with(", ") {
                    text.truncate(text.len() - 2);
                }
                text.push(')');
                (text, P_ATOM)
            }
        }
    }

    fn binary(&mut self, op: BinOp, a: &PrimExpr, b: &PrimExpr, t: DataType) -> (String, u8) {
        let call = |p: &mut Printer, name: &str| {
            let (x, y) = (p.expr(a).0, p.expr(b).0);
            (format!("{name}({x}, {y})"), P_ATOM)
        };
        let infix = |p: &mut Printer, sym: &str, prec: u8| {
            let x = p.wrap(a, prec);
            let y = p.wrap(b, prec + 1);
            (format!("{x} {sym} {y}"), prec)
        };
        match op {
            BinOp::Add => infix(self, "+", P_ADD),
            BinOp::Sub => infix(self, "-", P_ADD),
            BinOp::Mul => infix(self, "*", P_MUL),
            BinOp::Div if a.dtype().is_floating() => infix(self, "/", P_MUL),
            BinOp::Div => call(self, "T.truncdiv"),
            BinOp::Mod => call(self, "T.truncmod"),
            BinOp::FloorDiv => infix(self, "//", P_MUL),
            BinOp::FloorMod => infix(self, "%", P_MUL),
            BinOp::Min => call(self, "T.min"),
            BinOp::Max => call(self, "T.max"),
            BinOp::And if t.is_scalar() => infix(self, "and", P_AND),
            BinOp::Or if t.is_scalar() => infix(self, "or", P_OR),
            BinOp::And => call(self, "T.And"),
            BinOp::Or => call(self, "T.Or"),
            cmp => {
                let x = self.wrap(a, P_CMP + 1);
                let y = self.wrap(b, P_CMP + 1);
                (format!("{x} {} {y}", cmp.symbol()), P_CMP)
            }
        }
    }

    fn shape_tuple(&mut self, dims: &[PrimExpr]) -> String {
        let items = self.args(dims);
        if dims.len() == 1 {
            format!("({items},)")
        } else {
            format!("({items})")
        }
    }

    fn buffer_type(&mut self, b: &Buffer) -> String {
        let mut s = format!(
            "T.Buffer({}, \"{}\"",
            self.shape_tuple(b.shape()),
            dtype_str(b.dtype())
        );
        if !b.strides().is_empty() {
            let strides = self.shape_tuple(b.strides());
            s.push_str(&format!(", strides={strides}"));
        }
        if !b.elem_offset().is_const_int(0) {
            let off = self.expr(b.elem_offset()).0;
            s.push_str(&format!(", elem_offset={off}"));
        }
        if b.scope() != "global" {
            s.push_str(&format!(", scope=\"{}\"", b.scope()));
        }
        s.push(')');
        s
    }

    fn value(&mut self, v: &AnyView<'_>) -> String {
        if let Some(e) = PrimExpr::from_any_strict(v) {
            return self.expr(&e).0;
        }
        if let Some(b) = Buffer::try_from_view(v) {
            return self.buffer_name(&b);
        }
        if let Some(s) = v.str_bytes() {
            return format!("{:?}", String::from_utf8_lossy(s));
        }
        if let Some(a) = Array::try_from_view(v) {
            let items: Vec<String> = a.iter().map(|x| self.value(&x)).collect();
            return format!("[{}]", items.join(", "));
        }
        if let Some(m) = Map::try_from_view(v) {
            return self.map(&m);
        }
        kiln_ffi::reflection::repr_value(v)
    }

    fn map(&mut self, m: &Map) -> String {
        let items: Vec<String> = m
            .iter()
            .map(|(k, x)| format!("{}: {}", self.value(&k), self.value(&x)))
            .collect();
        format!("{{{}}}", items.join(", "))
    }

    fn body(&mut self, s: &Stmt) {
        self.indent += 1;
        self.stmt(s);
        self.indent -= 1;
    }

    fn stmt(&mut self, s: &Stmt) {
        match s.kind() {
            StmtKind::For(f) => {
                // Nodes made field by field may have mismatched types: print, never panic.
                let start = self.expr(&f.min).0;
                let stop = match crate::expr::try_build_binary(BinOp::Add, &f.min, &f.extent) {
                    Ok(stop) => self.expr(&stop).0,
                    Err(_) => format!("{start} + {}", self.wrap(&f.extent, P_ADD + 1)),
                };
                let var = self.var_name(&f.loop_var);
                let annotations = if f.annotations.is_empty() {
                    String::new()
                } else {
                    format!(", annotations={}", self.map(&f.annotations))
                };
                let iter = match (f.kind, annotations.is_empty()) {
                    (ForKind::Serial, true) => format!("range({start}, {stop})"),
                    (kind, _) => format!("T.{}({start}, {stop}{annotations})", kind.name()),
                };
                self.line(&format!("for {var} in {iter}:"));
                self.body(&f.body);
            }
            StmtKind::BufferStore(st) => {
                let name = self.buffer_name(&st.buffer);
                let idx = self.args(&st.indices);
                let value = self.expr(&st.value).0;
                self.line(&format!("{name}[{idx}] = {value}"));
            }
            StmtKind::Allocate(a) => {
                // Allocate(DeclBuffer(b)) over b's own data reads as TVMScript's `T.decl_buffer`.
                if let StmtKind::DeclBuffer(d) = a.body.kind() {
                    if d.buffer.data() == &a.buffer_var && a.condition.is_const_int(1) {
                        let name = self.buffer_name(&d.buffer);
                        let data_hint = format!("{name}_data");
                        let data = self.fresh(&data_hint);
                        self.names.insert(ptr_key(a.buffer_var.object()), data);
                        let ty = self.buffer_type(&d.buffer);
                        let decl = ty.replacen("T.Buffer(", "T.decl_buffer(", 1);
                        self.line(&format!("{name} = {decl}"));
                        self.stmt(&d.body);
                        return;
                    }
                }
                let extents = self.args(&a.extents);
                let var = self.var_name(&a.buffer_var);
                let mut text = format!(
                    "{var} = T.allocate([{extents}], \"{}\", \"{}\"",
                    dtype_str(a.dtype),
                    a.scope
                );
                if !a.condition.is_const_int(1) {
                    let c = self.expr(&a.condition).0;
                    text.push_str(&format!(", condition={c}"));
                }
                text.push(')');
                self.line(&text);
                self.stmt(&a.body);
            }
            StmtKind::DeclBuffer(d) => {
                let name = self.buffer_name(&d.buffer);
                let data = self.var_name(d.buffer.data());
                let ty = self.buffer_type(&d.buffer);
                let decl = format!(
                    "{}, data={data})",
                    ty.replacen("T.Buffer(", "T.decl_buffer(", 1)
                        .trim_end_matches(')')
                );
                self.line(&format!("{name} = {decl}"));
                self.stmt(&d.body);
            }
            StmtKind::IfThenElse(i) => {
                let c = self.expr(&i.condition).0;
                self.line(&format!("if {c}:"));
                self.body(&i.then_case);
                if let Some(e) = &i.else_case {
                    self.line("else:");
                    self.body(e);
                }
            }
            StmtKind::LetStmt(l) => {
                let value = self.expr(&l.value).0;
                let var = self.var_name(&l.var);
                self.line(&format!("{var}: T.{} = {value}", dtype_str(l.var.dtype())));
                self.stmt(&l.body);
            }
            StmtKind::Seq(q) => {
                if q.seq.is_empty() {
                    self.line("pass");
                }
                for x in q.seq.iter() {
                    self.stmt(x);
                }
            }
            StmtKind::AttrStmt(a) => {
                let node = self.value(&a.node.view());
                let value = self.expr(&a.value).0;
                self.line(&format!("with T.attr({node}, {:?}, {value}):", a.attr_key));
                self.body(&a.body);
            }
            StmtKind::Assert(a) => {
                let c = self.expr(&a.condition).0;
                let m = self.expr(&a.message).0;
                self.line(&format!("assert {c}, {m}"));
                self.stmt(&a.body);
            }
            StmtKind::Evaluate(e) => {
                let v = self.expr(&e.value).0;
                self.line(&format!("T.evaluate({v})"));
            }
        }
    }

    fn func(&mut self, f: &PrimFunc, default_name: &str) {
        let name = f
            .global_symbol()
            .unwrap_or_else(|| default_name.to_string());
        let mut params = Vec::new();
        for p in f.params() {
            let pname = self.var_name(p);
            match f.buffer_map().get(p) {
                Some(b) => {
                    // The buffer prints under its parameter's name.
                    self.names.insert(ptr_key(b.object()), pname.clone());
                    let ty = self.buffer_type(b);
                    params.push(format!("{pname}: {ty}"));
                }
                None => params.push(format!("{pname}: T.{}", dtype_str(p.dtype()))),
            }
        }
        let ret = if f.ret_type().is_void() {
            String::new()
        } else {
            format!(" -> T.{}", dtype_str(f.ret_type()))
        };
        self.line("@T.prim_func");
        self.line(&format!("def {name}({}){ret}:", params.join(", ")));
        self.indent += 1;
        if !f.attrs().is_empty() {
            let attrs = self.map(f.attrs());
            self.line(&format!("T.func_attr({attrs})"));
        }
        self.stmt(f.body());
        self.indent -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{floordiv, floormod, max, min};
    use crate::stmt::ForKind;

    #[test]
    fn expressions_print_with_python_precedence() {
        let (x, y, z) = (Var::int32("x"), Var::int32("y"), Var::int32("z"));
        let e = (&x + &y) * &z;
        assert_eq!(e.to_string(), "(x + y) * z");
        let e = &x + &y * &z;
        assert_eq!(e.to_string(), "x + y * z");
        let e = &x - (&y - &z);
        assert_eq!(e.to_string(), "x - (y - z)");
        assert_eq!(floordiv(&x, 8).to_string(), "x // 8");
        assert_eq!(floormod(&x + 1, 8).to_string(), "(x + 1) % 8");
        assert_eq!(min(&x, max(&y, 0)).to_string(), "T.min(x, T.max(y, 0))");
        let c = x.lt(4).logical_and(y.ge(&z).logical_or(z.equal(1)));
        assert_eq!(c.to_string(), "x < 4 and (y >= z or z == 1)");
        assert_eq!((x.clone() * -3).to_string(), "x * -3");
        let f = Var::new("f", DataType::float(32));
        assert_eq!((&f * 2.5).to_string(), "f * T.float32(2.5)");
        assert_eq!(
            PrimExpr::i64(7).cast(DataType::int(32)).to_string(),
            "7",
            "constant casts fold"
        );
        assert_eq!(
            x.cast(DataType::int(64)).to_string(),
            "T.Cast(\"int64\", x)"
        );
        let x2 = Var::int32("x");
        assert_eq!((&x + &x2).to_string(), "x + x_1");
    }

    #[test]
    fn loops_and_functions_print_like_tvmscript() {
        let t = DataType::float(32);
        let n = PrimExpr::i32(128);
        let (a, b, c) = (
            Buffer::decl("A", t, vec![n.clone()]),
            Buffer::decl("B", t, vec![n.clone()]),
            Buffer::decl("C", t, vec![n.clone()]),
        );
        let i = Var::int32("i");
        let body = Stmt::for_loop(
            &i,
            0,
            128,
            ForKind::Serial,
            c.store(
                a.load(vec![i.to_expr()]) + b.load(vec![i.to_expr()]),
                vec![i.to_expr()],
            ),
        );
        assert_eq!(
            body.to_string(),
            "for i in range(0, 128):\n    C[i] = A[i] + B[i]"
        );
        let f = PrimFunc::from_buffers("add", &[a, b, c], body);
        let expected = "@T.prim_func\n\
def add(A: T.Buffer((128,), \"float32\"), B: T.Buffer((128,), \"float32\"), C: T.Buffer((128,), \"float32\")):\n    \
T.func_attr({\"global_symbol\": \"add\"})\n    \
for i in range(0, 128):\n        \
C[i] = A[i] + B[i]";
        assert_eq!(f.to_string(), expected);
        let par = Stmt::for_loop(&i, 0, 4, ForKind::Parallel, Stmt::no_op());
        assert_eq!(
            par.to_string(),
            "for i in T.parallel(0, 4):\n    T.evaluate(0)"
        );
    }
}
