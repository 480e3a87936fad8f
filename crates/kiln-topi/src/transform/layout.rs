//! Tensor layouts named as in TVM (`NCHW`, `OIHW16o`, `NCHW8c`) and `layout_transform` between
//! two layouts of the same axes.
//!
//! A layout is a sequence of axes: an upper-case letter is a primal axis (`O`), a number
//! followed by a lower-case letter is a block of that primal axis (`16o`: the inner 16 of `O`,
//! which the `O` axis then counts in blocks of). A primal axis has at most one block.

use super::util::{compute_tagged, value_error};
use crate::tag;
use kiln_ffi::Result;
use kiln_te::Tensor;
use kiln_tir::{floordiv, floormod, PrimExpr};

/// One axis of a [`Layout`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutAxis {
    /// A primal axis (upper-case letter).
    Primal(char),
    /// The inner block of a primal axis: its letter (upper-case) and its size.
    Block(char, i64),
}

/// A parsed layout string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The axes, outermost first.
    pub axes: Vec<LayoutAxis>,
}

impl Layout {
    /// Parses `s` (`"OIHW16o"`); an error names the string and what is wrong.
    pub fn parse(s: &str) -> Result<Layout> {
        let bad = |why: String| value_error("layout", format!("{s:?}: {why}"));
        let mut axes = Vec::new();
        let mut num = String::new();
        for ch in s.chars() {
            if ch.is_ascii_digit() {
                num.push(ch);
            } else if ch.is_ascii_uppercase() {
                if !num.is_empty() {
                    return Err(bad(format!("a block size before primal axis {ch}")));
                }
                axes.push(LayoutAxis::Primal(ch));
            } else if ch.is_ascii_lowercase() {
                let n: i64 = num
                    .parse()
                    .map_err(|_| bad(format!("block axis {ch} has no size")))?;
                if n < 1 {
                    return Err(bad(format!("block axis {ch} has size {n}")));
                }
                num.clear();
                axes.push(LayoutAxis::Block(ch.to_ascii_uppercase(), n));
            } else {
                return Err(bad(format!("unexpected character {ch:?}")));
            }
        }
        if !num.is_empty() {
            return Err(bad("ends with a number".into()));
        }
        let l = Layout { axes };
        for (i, a) in l.axes.iter().enumerate() {
            let c = a.letter();
            let same = l.axes[i + 1..].iter().filter(|b| **b == *a).count();
            if same > 0 {
                return Err(bad(format!("axis {a:?} appears twice")));
            }
            if matches!(a, LayoutAxis::Block(..)) && l.primal_index(c).is_none() {
                return Err(bad(format!("block of {c} without primal axis {c}")));
            }
        }
        Ok(l)
    }

    /// The primal letters in order.
    pub fn primals(&self) -> Vec<char> {
        self.axes
            .iter()
            .filter_map(|a| match a {
                LayoutAxis::Primal(c) => Some(*c),
                LayoutAxis::Block(..) => None,
            })
            .collect()
    }

    /// The position of primal axis `c`.
    pub fn primal_index(&self, c: char) -> Option<usize> {
        self.axes.iter().position(|a| *a == LayoutAxis::Primal(c))
    }

    /// The position and size of the block of `c`, if any.
    pub fn block(&self, c: char) -> Option<(usize, i64)> {
        self.axes.iter().enumerate().find_map(|(i, a)| match a {
            LayoutAxis::Block(b, n) if *b == c => Some((i, *n)),
            _ => None,
        })
    }

    /// The shape under this layout of a tensor whose primal extents are `extent(letter)`. An
    /// axis that its block does not divide is padded up to the next multiple.
    pub fn shape_of(&self, extent: impl Fn(char) -> i64) -> Vec<i64> {
        self.axes
            .iter()
            .map(|a| match *a {
                LayoutAxis::Primal(c) => {
                    let e = extent(c);
                    match self.block(c) {
                        Some((_, b)) => (e + b - 1) / b,
                        None => e,
                    }
                }
                LayoutAxis::Block(_, b) => b,
            })
            .collect()
    }

    /// The primal extents of a tensor of `shape` under this layout, by letter.
    pub fn primal_extents(&self, shape: &[i64]) -> Result<Vec<(char, i64)>> {
        if shape.len() != self.axes.len() {
            return Err(value_error(
                "layout",
                format!(
                    "a tensor of rank {} does not have layout {self} (rank {})",
                    shape.len(),
                    self.axes.len()
                ),
            ));
        }
        Ok(self
            .primals()
            .into_iter()
            .map(|c| {
                let i = self.primal_index(c).expect("a primal axis");
                let b = self.block(c).map_or(1, |(j, _)| shape[j]);
                (c, shape[i] * b)
            })
            .collect())
    }

    /// Whether `other` has the same primal axes (in any order).
    pub fn same_axes(&self, other: &Layout) -> bool {
        let mut a = self.primals();
        let mut b = other.primals();
        a.sort_unstable();
        b.sort_unstable();
        a == b
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for a in &self.axes {
            match a {
                LayoutAxis::Primal(c) => write!(f, "{c}")?,
                LayoutAxis::Block(c, n) => write!(f, "{n}{}", c.to_ascii_lowercase())?,
            }
        }
        Ok(())
    }
}

impl LayoutAxis {
    /// The primal letter this axis belongs to.
    pub fn letter(&self) -> char {
        match *self {
            LayoutAxis::Primal(c) | LayoutAxis::Block(c, _) => c,
        }
    }
}

/// Checks that `src` and `dst` name the same axes and that `shape` has layout `src`; returns
/// the output shape under `dst` (padded where a block of `dst` does not divide its axis).
pub fn layout_transform_shape(shape: &[i64], src: &Layout, dst: &Layout) -> Result<Vec<i64>> {
    if !src.same_axes(dst) {
        return Err(value_error(
            "layout_transform",
            format!("layouts {src} and {dst} do not have the same axes"),
        ));
    }
    let ext = src.primal_extents(shape)?;
    Ok(dst.shape_of(|c| ext.iter().find(|(l, _)| *l == c).map_or(1, |(_, e)| *e)))
}

/// For an index under `dst`, whether it falls in padding (a primal coordinate at or past the
/// source extent `extent(letter)`), as a predicate over the index type.
pub fn in_padding<T: Clone, B>(
    idx: &[T],
    dst: &Layout,
    extents: &[(char, i64)],
    mul_add: impl Fn(&T, i64, &T) -> T,
    ge: impl Fn(&T, i64) -> B,
    or: impl Fn(B, B) -> B,
) -> Option<B> {
    let mut pred: Option<B> = None;
    for &(c, e) in extents {
        let (Some(i), Some((j, b))) = (dst.primal_index(c), dst.block(c)) else {
            continue;
        };
        if e % b == 0 {
            continue;
        }
        let p = ge(&mul_add(&idx[i], b, &idx[j]), e);
        pred = Some(match pred {
            None => p,
            Some(q) => or(q, p),
        });
    }
    pred
}

/// For an index under `dst`, the index under `src` of the same element: primal coordinates
/// are `outer * block + inner`, then split again by `src`'s blocks. Generic over the index
/// type so both the compute and the constant evaluator use it.
pub fn map_index<T: Clone>(
    idx: &[T],
    src: &Layout,
    dst: &Layout,
    mul_add: impl Fn(&T, i64, &T) -> T,
    div_mod: impl Fn(&T, i64) -> (T, T),
) -> Vec<T> {
    let coord = |c: char| -> T {
        let i = dst.primal_index(c).expect("same axes");
        match dst.block(c) {
            Some((j, b)) => mul_add(&idx[i], b, &idx[j]),
            None => idx[i].clone(),
        }
    };
    src.axes
        .iter()
        .map(|a| match *a {
            LayoutAxis::Primal(c) => match src.block(c) {
                Some((_, b)) => div_mod(&coord(c), b).0,
                None => coord(c),
            },
            LayoutAxis::Block(c, b) => div_mod(&coord(c), b).1,
        })
        .collect()
}

/// `x` (layout `src`) re-laid out as `dst` (TVM's `layout_transform`), e.g. `OIHW` weights to
/// `OIHW16o` for a convolution that loads 16 output channels as one vector. Where a block of
/// `dst` does not divide its axis, the padding holds zeros.
pub fn layout_transform(x: &Tensor, src: &str, dst: &str) -> Result<Tensor> {
    let (src, dst) = (Layout::parse(src)?, Layout::parse(dst)?);
    let shape: Vec<i64> = x
        .shape()
        .iter()
        .map(|d| {
            d.as_int()
                .ok_or_else(|| value_error("layout_transform", "symbolic shape"))
        })
        .collect::<Result<_>>()?;
    let out = layout_transform_shape(&shape, &src, &dst)?;
    let extents = src.primal_extents(&shape)?;
    let out: Vec<PrimExpr> = out.into_iter().map(PrimExpr::i32).collect();
    let mul_add = |o: &PrimExpr, b: i64, inner: &PrimExpr| o.clone() * b + inner.clone();
    compute_tagged(
        &out,
        |i| {
            let idx: Vec<PrimExpr> = i.iter().map(|v| v.to_expr()).collect();
            let src_idx = map_index(&idx, &src, &dst, mul_add, |c, b| {
                (floordiv(c, b), floormod(c, b))
            });
            let padding = in_padding(
                &idx,
                &dst,
                &extents,
                mul_add,
                |c, e| c.ge(e),
                |p, q| p.logical_or(q),
            );
            match padding {
                None => x.at(&src_idx),
                Some(p) => {
                    let safe: Vec<PrimExpr> = src_idx
                        .iter()
                        .zip(&shape)
                        .map(|(i, &d)| kiln_tir::min(i.clone(), d - 1))
                        .collect();
                    kiln_te::if_then_else(p, PrimExpr::const_float(x.dtype(), 0.0), x.at(&safe))
                }
            }
        },
        "layout_transform",
        tag::INJECTIVE,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_maps_indices() {
        let src = Layout::parse("OIHW").unwrap();
        let dst = Layout::parse("OIHW16o").unwrap();
        assert_eq!(dst.to_string(), "OIHW16o");
        assert_eq!(
            layout_transform_shape(&[64, 3, 7, 7], &src, &dst).unwrap(),
            vec![4, 3, 7, 7, 16]
        );
        // dst [2, 1, 0, 0, 5] is O = 2 * 16 + 5.
        let m = map_index(
            &[2i64, 1, 0, 0, 5],
            &src,
            &dst,
            |o, b, i| o * b + i,
            |c, b| (c / b, c % b),
        );
        assert_eq!(m, vec![37, 1, 0, 0]);
        assert_eq!(
            layout_transform_shape(&[60, 3, 7, 7], &src, &dst).unwrap(),
            vec![4, 3, 7, 7, 16],
            "padded up to a whole block"
        );
        assert!(Layout::parse("OIHW16").is_err());
        assert!(Layout::parse("OIH16w").is_err());
        assert!(Layout::parse("OIHW4x").is_err());
        assert!(!src.same_axes(&Layout::parse("NCHW").unwrap()));
    }
}
