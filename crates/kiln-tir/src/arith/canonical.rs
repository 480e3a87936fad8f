//! The canonical form of linear integer expressions: `sum(coeff * atom) + constant`, where atoms
//! are the non-linear parts (variables, loads, products of non-constants, divisions, ...),
//! compared structurally. Turning `+ - *` trees into sums and back combines like terms
//! (`x*2 + x*3` is `x*5`, `(x*4 + y) - x*4` is `y`), and is where the division rules live:
//!
//! - `floordiv(c*Q + R, c) = Q + floordiv(R, c)`, and `floordiv(R, c)` is a constant when the
//!   bounds of `R` fall in one multiple of `c` (`floordiv(x*8 + y, 8) = x` for `0 <= y < 8`);
//! - `floormod(c*Q + R, c) = floormod(R, c)`, which is `R - k*c` when `R` lies in
//!   `[k*c, (k+1)*c)`;
//! - common factors cancel (`floordiv(x*4, 8) = floordiv(x, 2)`, `floormod(x*4, 8) =
//!   floormod(x, 2)*4`), nested divisions merge (`floordiv(floordiv(x, a), b) =
//!   floordiv(x, a*b)`, `floormod(floormod(x, a), b) = floormod(x, b)` when `b` divides `a`);
//! - `floordiv(X, c)*c + floormod(X, c) = X` (and the same for truncating `Div`/`Mod`);
//! - truncating `Div`/`Mod` follow the floor rules when the dividend is known non-negative, and
//!   exact divisions (every coefficient a multiple of `c`) in any case.
//!
//! Only scalar signed integers are put in canonical form (unsigned wrap-around makes reordering
//! unsafe for comparisons and divisions).

use super::const_fold::floor_div;
use super::Analyzer;
use crate::dtype::DataTypeExt;
use crate::expr::{BinOp, ExprKind, PrimExpr};
use crate::structural::structural_equal;
use kiln_ffi::DataType;

/// `sum(coeff * atom) + constant` in integer type `dtype` (coefficients wrap at its width).
#[derive(Clone, Debug)]
pub(crate) struct Sum {
    pub(crate) terms: Vec<(PrimExpr, i64)>,
    pub(crate) constant: i64,
    pub(crate) dtype: DataType,
}

/// True for the types canonical forms apply to.
pub(crate) fn is_canonical_type(t: DataType) -> bool {
    t.is_int() && t.is_scalar()
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.min(i64::MAX as u64) as i64
}

impl Sum {
    pub(crate) fn new(dtype: DataType) -> Self {
        Sum {
            terms: Vec::new(),
            constant: 0,
            dtype,
        }
    }

    fn wrap(&self, v: i64) -> i64 {
        self.dtype.wrap_int(v)
    }

    /// Parses `+ - *`-by-constant trees into a sum; everything else is an atom.
    pub(crate) fn of(e: &PrimExpr) -> Sum {
        let mut s = Sum::new(e.dtype());
        s.add_expr(e, 1);
        s
    }

    fn add_expr(&mut self, e: &PrimExpr, k: i64) {
        match e.kind() {
            ExprKind::IntImm(v) => {
                self.constant = self.wrap(self.constant.wrapping_add(v.wrapping_mul(k)))
            }
            ExprKind::Binary(BinOp::Add, a, b) => {
                self.add_expr(a, k);
                self.add_expr(b, k);
            }
            ExprKind::Binary(BinOp::Sub, a, b) => {
                self.add_expr(a, k);
                self.add_expr(b, k.wrapping_neg());
            }
            ExprKind::Binary(BinOp::Mul, a, b) if b.as_int().is_some() => {
                self.add_expr(a, k.wrapping_mul(b.as_int().unwrap()))
            }
            ExprKind::Binary(BinOp::Mul, a, b) if a.as_int().is_some() => {
                self.add_expr(b, k.wrapping_mul(a.as_int().unwrap()))
            }
            _ => self.add_term(e.clone(), k),
        }
    }

    /// Adds `coeff * atom`, combining with a structurally equal atom.
    pub(crate) fn add_term(&mut self, atom: PrimExpr, coeff: i64) {
        let coeff = self.wrap(coeff);
        if coeff == 0 {
            return;
        }
        if let Some(i) = self
            .terms
            .iter()
            .position(|(a, _)| structural_equal(a, &atom))
        {
            let c = self.wrap(self.terms[i].1.wrapping_add(coeff));
            if c == 0 {
                self.terms.remove(i);
            } else {
                self.terms[i].1 = c;
            }
        } else {
            self.terms.push((atom, coeff));
        }
    }

    /// Adds `scale * other`.
    pub(crate) fn add_sum(&mut self, other: &Sum, scale: i64) {
        for (a, c) in &other.terms {
            self.add_term(a.clone(), c.wrapping_mul(scale));
        }
        self.constant = self.wrap(
            self.constant
                .wrapping_add(other.constant.wrapping_mul(scale)),
        );
    }

    /// Multiplies by a constant.
    pub(crate) fn scaled(&self, k: i64) -> Sum {
        let mut s = Sum::new(self.dtype);
        s.add_sum(self, k);
        s
    }

    /// Replaces `floordiv(X, c)*k*c + floormod(X, c)*k` (and the `Div`/`Mod` pair) by `X*k`.
    fn merge_div_mod(&mut self) {
        'again: loop {
            for i in 0..self.terms.len() {
                let (mod_atom, k) = self.terms[i].clone();
                let (div_op, x, c) = match mod_atom.kind() {
                    ExprKind::Binary(BinOp::FloorMod, x, c) => {
                        (BinOp::FloorDiv, x.clone(), c.clone())
                    }
                    ExprKind::Binary(BinOp::Mod, x, c) => (BinOp::Div, x.clone(), c.clone()),
                    _ => continue,
                };
                let Some(cv) = c.as_int() else { continue };
                let want = self.wrap(k.wrapping_mul(cv));
                let found = self.terms.iter().position(|(a, kk)| {
                    *kk == want
                        && matches!(a.kind(), ExprKind::Binary(op, y, d)
                            if op == div_op && d.as_int() == Some(cv) && structural_equal(y, &x))
                });
                if let Some(j) = found {
                    let (hi, lo) = if i > j { (i, j) } else { (j, i) };
                    self.terms.remove(hi);
                    self.terms.remove(lo);
                    let xs = Sum::of(&x);
                    self.add_sum(&xs, k);
                    continue 'again;
                }
            }
            break;
        }
    }

    /// Builds the expression: positive terms first, `- c*t` for negative ones, constant last.
    pub(crate) fn to_expr(&self) -> PrimExpr {
        let t = self.dtype;
        let mut s = self.clone();
        s.merge_div_mod();
        let term = |a: &PrimExpr, c: i64| -> PrimExpr {
            if c == 1 {
                a.clone()
            } else {
                PrimExpr::binary_raw(BinOp::Mul, a.clone(), PrimExpr::const_int(t, c))
            }
        };
        let mut acc: Option<PrimExpr> = None;
        let first_pos = s.terms.iter().position(|(_, c)| *c > 0);
        let mut order: Vec<usize> = Vec::with_capacity(s.terms.len());
        if let Some(p) = first_pos {
            order.push(p);
        }
        order.extend((0..s.terms.len()).filter(|&i| Some(i) != first_pos));
        for i in order {
            let (a, c) = &s.terms[i];
            acc = Some(match acc {
                None if *c > 0 => term(a, *c),
                None if s.constant > 0 => {
                    let k = PrimExpr::const_int(t, s.constant);
                    s.constant = 0;
                    PrimExpr::binary_raw(BinOp::Sub, k, term(a, c.wrapping_neg()))
                }
                None => term(a, *c),
                Some(x) if *c > 0 => PrimExpr::binary_raw(BinOp::Add, x, term(a, *c)),
                Some(x) => PrimExpr::binary_raw(BinOp::Sub, x, term(a, c.wrapping_neg())),
            });
        }
        match acc {
            None => PrimExpr::const_int(t, s.constant),
            Some(x) if s.constant > 0 => {
                PrimExpr::binary_raw(BinOp::Add, x, PrimExpr::const_int(t, s.constant))
            }
            Some(x) if s.constant < 0 && s.constant != i64::MIN => {
                PrimExpr::binary_raw(BinOp::Sub, x, PrimExpr::const_int(t, -s.constant))
            }
            Some(x) if s.constant != 0 => {
                PrimExpr::binary_raw(BinOp::Add, x, PrimExpr::const_int(t, s.constant))
            }
            Some(x) => x,
        }
    }
}

/// Floor or truncating division / remainder.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DivKind {
    Floor,
    Trunc,
}

/// Simplifies `a op b` (children already simplified) for `+ - * // % / mod` on scalar signed
/// integers; `None` when the operator is not one of these.
pub(crate) fn simplify_arith(
    an: &mut Analyzer,
    op: BinOp,
    a: &PrimExpr,
    b: &PrimExpr,
) -> Option<PrimExpr> {
    let t = a.dtype();
    match op {
        BinOp::Add | BinOp::Sub => {
            let mut s = Sum::of(a);
            s.add_sum(&Sum::of(b), if op == BinOp::Add { 1 } else { -1 });
            Some(s.to_expr())
        }
        BinOp::Mul => {
            if let Some(c) = b.as_int() {
                Some(Sum::of(a).scaled(c).to_expr())
            } else {
                a.as_int().map(|c| Sum::of(b).scaled(c).to_expr())
            }
        }
        BinOp::FloorDiv | BinOp::FloorMod | BinOp::Div | BinOp::Mod => {
            let c = b.as_int().filter(|&c| c > 0)?;
            let kind = if matches!(op, BinOp::FloorDiv | BinOp::FloorMod) {
                DivKind::Floor
            } else {
                DivKind::Trunc
            };
            let is_div = matches!(op, BinOp::FloorDiv | BinOp::Div);
            let s = Sum::of(a);
            let r = div_mod(an, &s, c, kind, is_div, t);
            Some(r)
        }
        _ => None,
    }
}

/// Splits `s` into `c*Q + R`: terms with coefficients divisible by `c` go to `Q`.
fn split(s: &Sum, c: i64) -> (Sum, Sum) {
    let mut q = Sum::new(s.dtype);
    let mut r = Sum::new(s.dtype);
    for (a, k) in &s.terms {
        if k % c == 0 {
            q.add_term(a.clone(), k / c);
        } else {
            r.add_term(a.clone(), *k);
        }
    }
    r.constant = s.constant;
    (q, r)
}

/// `k` when `floor(R / c)` is the constant `k` for every value `R` can take.
fn bucket(an: &mut Analyzer, r: &Sum, c: i64) -> Option<i64> {
    let b = an.const_int_bound(&r.to_expr());
    if b.min <= super::NEG_INF || b.max == super::POS_INF {
        return None;
    }
    let (lo, hi) = (
        floor_div(b.min as i128, c as i128),
        floor_div(b.max as i128, c as i128),
    );
    (lo == hi).then_some(lo as i64)
}

fn div_mod(
    an: &mut Analyzer,
    s: &Sum,
    c: i64,
    kind: DivKind,
    is_div: bool,
    t: DataType,
) -> PrimExpr {
    let (mut q, r) = split(s, c);
    // Exact division (valid for truncation too): every coefficient and the constant divide.
    if r.terms.is_empty() && r.constant % c == 0 {
        q.constant = r.constant / c;
        return if is_div {
            q.to_expr()
        } else {
            PrimExpr::const_int(t, 0)
        };
    }
    let whole = an.const_int_bound(&s.to_expr());
    if kind == DivKind::Trunc && whole.min > -c && whole.max < c {
        // |dividend| < c: the quotient is 0 and the remainder the dividend itself.
        return if is_div {
            PrimExpr::const_int(t, 0)
        } else {
            s.to_expr()
        };
    }
    if kind == DivKind::Trunc && whole.min < 0 {
        // Truncation differs from floor for negative dividends: keep the node.
        let op = if is_div { BinOp::Div } else { BinOp::Mod };
        return PrimExpr::binary_raw(op, s.to_expr(), PrimExpr::const_int(t, c));
    }
    // From here the dividend is non-negative or the division is a floor one: floor rules hold.
    let mut r = r;
    if r.constant.abs() >= c {
        let qc = r.constant / c;
        r.constant -= qc * c;
        q.constant = q.wrap(q.constant.wrapping_add(qc));
    }
    if let Some(k) = bucket(an, &r, c) {
        return if is_div {
            q.constant = q.wrap(q.constant.wrapping_add(k));
            q.to_expr()
        } else {
            r.constant -= k * c;
            r.to_expr()
        };
    }
    // Cancel a common factor of the divisor, the coefficients and the constant.
    let g = r
        .terms
        .iter()
        .fold(gcd(c, r.constant), |g, (_, k)| gcd(g, *k));
    let (r, c) = if g > 1 {
        let mut r2 = Sum::new(r.dtype);
        for (a, k) in &r.terms {
            r2.add_term(a.clone(), k / g);
        }
        r2.constant = r.constant / g;
        (r2, c / g)
    } else {
        (r, c)
    };
    // A factor common to the divisor and the coefficients (not the constant): with
    // `r = f*Y + r0`, `0 <= r0 < f` and `f` dividing `c`, `r / c = Y / (c/f)` and
    // `r % c = f * (Y % (c/f)) + r0` (`(4x + 1) / 68` is `x / 17`).
    let f = r.terms.iter().fold(c, |g, (_, k)| gcd(g, *k));
    if f > 1 && !r.terms.is_empty() {
        let q0 = floor_div(r.constant as i128, f as i128) as i64;
        let r0 = r.constant - q0 * f;
        let mut y = Sum::new(r.dtype);
        for (a, k) in &r.terms {
            y.add_term(a.clone(), k / f);
        }
        y.constant = q0;
        let inner = div_mod(an, &y, c / f, DivKind::Floor, is_div, t);
        return if is_div {
            q.add_expr(&inner, 1);
            q.to_expr()
        } else {
            let mut out = Sum::of(&inner).scaled(f * g.max(1));
            out.constant = out.wrap(out.constant.wrapping_add(r0 * g.max(1)));
            out.to_expr()
        };
    }
    let trunc_ok = kind == DivKind::Trunc && an.const_int_bound(&r.to_expr()).min >= 0;
    let (div_op, mod_op) = if trunc_ok {
        (BinOp::Div, BinOp::Mod)
    } else {
        (BinOp::FloorDiv, BinOp::FloorMod)
    };
    // Nested divisions of a single atom merge.
    if r.constant == 0 && r.terms.len() == 1 && r.terms[0].1 == 1 {
        if let ExprKind::Binary(op, x, d) = r.terms[0].0.kind() {
            let d = d.as_int().unwrap_or(0);
            if is_div && op == BinOp::FloorDiv && d > 0 && !trunc_ok {
                let inner = div_mod(
                    an,
                    &Sum::of(x),
                    d.saturating_mul(c),
                    DivKind::Floor,
                    true,
                    t,
                );
                q.add_expr(&inner, 1);
                return q.to_expr();
            }
            if !is_div && op == BinOp::FloorMod && d > 0 && d % c == 0 && !trunc_ok {
                let inner = div_mod(an, &Sum::of(x), c, DivKind::Floor, false, t);
                return Sum::of(&inner).scaled(g.max(1)).to_expr();
            }
        }
    }
    let atom = |op| PrimExpr::binary_raw(op, r.to_expr(), PrimExpr::const_int(t, c));
    if is_div {
        q.add_term(atom(div_op), 1);
        q.to_expr()
    } else {
        let mut out = Sum::new(t);
        out.add_term(atom(mod_op), g.max(1));
        out.to_expr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Var;

    #[test]
    fn sums_combine_like_terms() {
        let (x, y) = (Var::int32("x"), Var::int32("y"));
        let s = Sum::of(&PrimExpr::binary_raw(
            BinOp::Add,
            PrimExpr::binary_raw(BinOp::Mul, x.to_expr(), PrimExpr::i32(2)),
            PrimExpr::binary_raw(BinOp::Mul, x.to_expr(), PrimExpr::i32(3)),
        ));
        assert_eq!(s.to_expr().to_string(), "x * 5");
        let mut s = Sum::of(&y.to_expr());
        s.add_term(x.to_expr(), -2);
        s.constant = 3;
        assert_eq!(s.to_expr().to_string(), "y - x * 2 + 3");
        let mut n = Sum::new(DataType::int(32));
        n.add_term(x.to_expr(), -1);
        n.constant = 4;
        assert_eq!(n.to_expr().to_string(), "4 - x");
    }
}
