//! Extents that an operator needs equal (a product's inner dimensions, dimensions that
//! broadcast) when one or both are known only at run time.
//!
//! A kernel compiled with run-time extents gives each input's unknown dimension a size
//! variable of its own, since nothing at compile time says which are the same. A compute that
//! needs two extents equal calls [`meet`]: equal expressions meet; while the kernel builder
//! [`collecting`] runs, a size variable also meets any other extent, and the meeting is
//! recorded, so the builder can build the compute again with the variable replaced by the other
//! extent. The inputs then share one variable (or carry the constant), and the kernel checks
//! when it is called that the tensors it is given agree (a clear error naming the argument and
//! the dimension), as it checks any other bound extent.

use kiln_tir::{structural_equal, PrimExpr, Var};
use std::cell::RefCell;

thread_local! {
    static MEETINGS: RefCell<Option<Vec<(Var, PrimExpr)>>> = const { RefCell::new(None) };
}

/// The extent where `a` and `b` meet: the expression itself when they are the same (or equal
/// constants); while [`collecting`], the other extent when one is a variable (a constant
/// preferred), the meeting recorded; else `None` (the caller reports its own error).
pub fn meet(a: &PrimExpr, b: &PrimExpr) -> Option<PrimExpr> {
    if structural_equal(a, b) {
        return Some(a.clone());
    }
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        return (x == y).then(|| a.clone());
    }
    MEETINGS.with(|m| {
        let mut m = m.borrow_mut();
        let list = m.as_mut()?;
        // The variable goes; the constant (or the first operand) stays.
        let (gone, kept) = match (a.as_var(), b.as_var()) {
            (Some(v), _) if b.as_int().is_some() || b.as_var().is_some() => (v, b.clone()),
            (_, Some(v)) => (v, a.clone()),
            (Some(v), None) => (v, b.clone()),
            (None, None) => return None,
        };
        list.push((gone, kept.clone()));
        Some(kept)
    })
}

/// Runs `f` recording the meetings of [`meet`] (in order); they are returned with `f`'s
/// result. Nested calls record into their own list.
pub fn collecting<T>(f: impl FnOnce() -> T) -> (T, Vec<(Var, PrimExpr)>) {
    let outer = MEETINGS.with(|m| m.borrow_mut().replace(Vec::new()));
    let out = f();
    let met = MEETINGS.with(|m| std::mem::replace(&mut *m.borrow_mut(), outer));
    (out, met.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ffi::DataType;

    #[test]
    fn variables_meet_only_while_collecting() {
        let n = Var::size_var("n", DataType::int(32)).to_expr();
        let m = Var::size_var("m", DataType::int(32)).to_expr();
        assert!(meet(&n, &m).is_none());
        assert!(meet(&PrimExpr::i32(3), &PrimExpr::i32(4)).is_none());
        assert!(meet(&n, &n).is_some());
        let (got, met) = collecting(|| (meet(&n, &PrimExpr::i32(8)), meet(&m, &n)));
        assert_eq!(got.0.and_then(|e| e.as_int()), Some(8));
        assert!(got.1.is_some_and(|e| structural_equal(&e, &n)));
        assert_eq!(met.len(), 2);
        assert!(structural_equal(&met[0].0.to_expr(), &n));
        assert!(structural_equal(&met[1].0.to_expr(), &m));
        assert!(meet(&n, &m).is_none(), "recording stops with the closure");
    }
}
