//! Relay-like text:
//!
//! ```text
//! fn (%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32]) {
//!   %0 = nn.conv2d(%x, %w, strides=[1, 1], padding=[1, 1, 1, 1], ...) /* ty=Tensor[(1, 4, 8, 8), float32] */;
//!   nn.relu(%0) /* ty=Tensor[(1, 4, 8, 8), float32] */
//! }
//! ```
//!
//! Scalar constants print as values (`1f`), others as `meta[Constant][k]` with their type;
//! nested (fused) functions print as `%k = fn (...) { ... };` and are called as `%k(...)`.

use super::attrs::{fmt_value, Attrs};
use super::expr::{Expr, Function};
use super::visit::post_order;
use std::collections::HashMap;
use std::fmt::Write;

struct Printer {
    names: HashMap<usize, String>,
    next: usize,
    consts: usize,
}

fn type_comment(e: &Expr) -> String {
    match e.checked_type() {
        Some(t) => format!(" /* ty={t} */"),
        None => String::new(),
    }
}

impl Printer {
    fn atom(&mut self, e: &Expr) -> String {
        if let Some(n) = self.names.get(&e.key()) {
            return n.clone();
        }
        match e {
            Expr::Var(v) => format!("%{}", v.name()),
            Expr::Op(o) => o.name.to_string(),
            Expr::Constant(c) => {
                if c.data.numel() == 1 && c.data.ndim() == 0 {
                    let v = c.data.to_f64_vec().map(|v| v[0]).unwrap_or(f64::NAN);
                    let d = c.data.dtype();
                    if kiln_tir::DataTypeExt::is_floating(d) {
                        format!("{v}f")
                    } else {
                        format!("{v}")
                    }
                } else {
                    let k = self.consts;
                    self.consts += 1;
                    let ty = super::ty::Type::tensor(c.data.shape(), c.data.dtype());
                    let s = format!("meta[Constant][{k}] /* ty={ty} */");
                    self.names.insert(e.key(), s.clone());
                    s
                }
            }
            _ => "<?>".into(),
        }
    }

    fn value(&mut self, e: &Expr, indent: &str, out: &mut String) -> String {
        match e {
            Expr::Call(c) => {
                let callee = self.atom(&c.op);
                let mut parts: Vec<String> = c.args.iter().map(|a| self.atom(a)).collect();
                for (k, v) in Attrs::new(&c.attrs).entries() {
                    parts.push(format!("{k}={}", fmt_value(&v)));
                }
                format!("{callee}({}){}", parts.join(", "), type_comment(e))
            }
            Expr::Tuple(t) => {
                let f: Vec<String> = t.fields.iter().map(|a| self.atom(a)).collect();
                let comma = if f.len() == 1 { "," } else { "" };
                format!("({}{comma}){}", f.join(", "), type_comment(e))
            }
            Expr::TupleGetItem(g) => {
                format!("{}.{}{}", self.atom(&g.tuple), g.index, type_comment(e))
            }
            Expr::Function(f) => {
                let mut inner = Printer {
                    names: HashMap::new(),
                    next: 0,
                    consts: self.consts,
                };
                let s = inner.function(f, &format!("{indent}  "), out);
                self.consts = inner.consts;
                s
            }
            _ => self.atom(e),
        }
    }

    fn function(&mut self, f: &Function, indent: &str, _out: &mut String) -> String {
        let mut head: Vec<String> = f
            .params()
            .iter()
            .map(|p| match p.ty() {
                Some(t) => format!("%{}: {t}", p.name()),
                None => format!("%{}", p.name()),
            })
            .collect();
        for (k, v) in Attrs::new(f.attrs()).entries() {
            head.push(format!("{k}={}", fmt_value(&v)));
        }
        let ret = match &f.0.ret_type {
            Some(t) => format!(" -> {t}"),
            None => String::new(),
        };
        let mut body = String::new();
        let order = post_order(f.body());
        for e in &order {
            if e.same_as(f.body()) {
                break;
            }
            if matches!(
                e,
                Expr::Call(_) | Expr::Tuple(_) | Expr::TupleGetItem(_) | Expr::Function(_)
            ) {
                let v = self.value(e, indent, &mut body);
                let name = format!("%{}", self.next);
                self.next += 1;
                let _ = writeln!(body, "{indent}  {name} = {v};");
                self.names.insert(e.key(), name);
            }
        }
        let last = self.value(f.body(), indent, &mut body);
        let _ = writeln!(body, "{indent}  {last}");
        format!("fn ({}){ret} {{\n{body}{indent}}}", head.join(", "))
    }
}

/// The text of an expression (a function prints whole; other nodes print their value with
/// the bindings they depend on).
pub fn print_expr(e: &Expr) -> String {
    let mut p = Printer {
        names: HashMap::new(),
        next: 0,
        consts: 0,
    };
    let mut out = String::new();
    match e {
        Expr::Function(f) => p.function(f, "", &mut out),
        _ => {
            let order = post_order(e);
            let mut body = String::new();
            for n in &order {
                if n.same_as(e) {
                    break;
                }
                if matches!(
                    n,
                    Expr::Call(_) | Expr::Tuple(_) | Expr::TupleGetItem(_) | Expr::Function(_)
                ) {
                    let v = p.value(n, "", &mut body);
                    let name = format!("%{}", p.next);
                    p.next += 1;
                    let _ = writeln!(body, "{name} = {v};");
                    p.names.insert(n.key(), name);
                }
            }
            let last = p.value(e, "", &mut body);
            format!("{body}{last}")
        }
    }
}

/// The text of a function.
pub fn print_function(f: &Function) -> String {
    print_expr(&Expr::Function(f.clone()))
}

/// A one-line description of a node for error messages.
pub fn short(e: &Expr) -> String {
    match e {
        Expr::Var(v) => format!("%{}", v.name()),
        Expr::Call(c) => match &c.op {
            Expr::Op(o) => format!("{}(...)", o.name),
            _ => "fn(...)".into(),
        },
        Expr::Constant(c) => format!("constant {:?}", c.data.shape()),
        Expr::Tuple(t) => format!("tuple of {}", t.fields.len()),
        Expr::TupleGetItem(g) => format!("{}.{}", short(&g.tuple), g.index),
        Expr::Function(f) => format!("fn with {} params", f.params().len()),
        Expr::Op(o) => o.name.to_string(),
    }
}
