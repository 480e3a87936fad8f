//! Structural equality of graph expressions (for tests): same node kinds, operators,
//! attributes, constants (shape, dtype and bytes) and types of variables, with variables
//! matched by position (function parameters, and free variables on first encounter, one to
//! one). Checked types are not compared (as in TVM).

use super::attrs::attrs_equal;
use super::expr::Expr;
use std::collections::HashMap;

#[derive(Default)]
struct Eq {
    vars: HashMap<usize, usize>,
    rev: HashMap<usize, usize>,
    memo: HashMap<(usize, usize), bool>,
}

impl Eq {
    fn var(&mut self, a: &Expr, b: &Expr) -> bool {
        let (Expr::Var(x), Expr::Var(y)) = (a, b) else {
            return false;
        };
        let (ka, kb) = (a.key(), b.key());
        match (self.vars.get(&ka), self.rev.get(&kb)) {
            (Some(&m), Some(&r)) => m == kb && r == ka,
            (None, None) => {
                if x.ty() != y.ty() {
                    return false;
                }
                self.vars.insert(ka, kb);
                self.rev.insert(kb, ka);
                true
            }
            _ => false,
        }
    }

    fn list(&mut self, a: &[Expr], b: &[Expr]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| self.eq(x, y))
    }

    fn eq(&mut self, a: &Expr, b: &Expr) -> bool {
        if let Some(&r) = self.memo.get(&(a.key(), b.key())) {
            return r;
        }
        let r = match (a, b) {
            (Expr::Var(_), Expr::Var(_)) => self.var(a, b),
            (Expr::Op(x), Expr::Op(y)) => x.name == y.name,
            (Expr::Constant(x), Expr::Constant(y)) => {
                x.data.shape() == y.data.shape()
                    && x.data.dtype() == y.data.dtype()
                    && x.data.to_bytes().ok() == y.data.to_bytes().ok()
            }
            (Expr::Call(x), Expr::Call(y)) => {
                self.eq(&x.op, &y.op)
                    && attrs_equal(&x.attrs, &y.attrs)
                    && self.list(&x.args, &y.args)
            }
            (Expr::Tuple(x), Expr::Tuple(y)) => self.list(&x.fields, &y.fields),
            (Expr::TupleGetItem(x), Expr::TupleGetItem(y)) => {
                x.index == y.index && self.eq(&x.tuple, &y.tuple)
            }
            (Expr::Function(x), Expr::Function(y)) => {
                let (px, py) = (x.params(), y.params());
                px.len() == py.len()
                    && px
                        .iter()
                        .zip(py)
                        .all(|(p, q)| self.var(&p.expr(), &q.expr()))
                    && attrs_equal(x.attrs(), y.attrs())
                    && self.eq(x.body(), y.body())
            }
            _ => false,
        };
        self.memo.insert((a.key(), b.key()), r);
        r
    }
}

/// True when `a` and `b` are structurally equal (see the module docs).
pub fn structural_equal(a: &Expr, b: &Expr) -> bool {
    Eq::default().eq(a, b)
}

/// Panics with both texts when `a` and `b` differ.
pub fn assert_structural_equal(a: &Expr, b: &Expr) {
    if !structural_equal(a, b) {
        panic!("structural mismatch\n--- left ---\n{a}\n--- right ---\n{b}");
    }
}
