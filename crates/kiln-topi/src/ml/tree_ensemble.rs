//! `tree_ensemble`: the predictions of an ensemble of decision trees (ONNX-ML `TreeEnsemble`,
//! and the tree layout its older regressor and classifier share), an extern kernel walking
//! each tree from its root for each row.
//!
//! The trees arrive as flat tables (built at compile time from the model's attributes): per
//! interior node its feature, threshold, comparison and whether a missing (NaN) value goes to
//! the true branch, and its two successors, each either a node (`>= 0`) or a leaf (`-(leaf +
//! 1)`); per tree its root (a node or a leaf); per leaf its target and weight. Set-membership
//! nodes are expanded by the converter into chains of equality tests, so the kernel knows six
//! comparisons. Walks take at most `depth` steps (the deepest tree's).

use crate::transform::util::{const_shape, constant, for_n, value_error};
use kiln_ffi::Result;
use kiln_te::{extern_op, ExternOutput, Tensor};
use kiln_tir::{cast, logical_and, logical_or, select, Buffer, DataType, PrimExpr, Stmt};

/// How the trees' values for one target are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregate {
    /// The mean over the trees.
    Average,
    /// The sum.
    Sum,
    /// The minimum.
    Min,
    /// The maximum.
    Max,
}

/// The comparison codes of [`TreeTables::mode`] (ONNX-ML's `nodes_modes` numbers).
pub mod mode {
    /// `x <= split`.
    pub const LEQ: i64 = 0;
    /// `x < split`.
    pub const LT: i64 = 1;
    /// `x >= split`.
    pub const GTE: i64 = 2;
    /// `x > split`.
    pub const GT: i64 = 3;
    /// `x == split`.
    pub const EQ: i64 = 4;
    /// `x != split`.
    pub const NEQ: i64 = 5;
}

/// The flat tree tables (tensors, usually constants) of [`tree_ensemble`].
pub struct TreeTables<'a> {
    /// `[S]` int32: the feature each interior node tests.
    pub feature: &'a Tensor,
    /// `[S]`, the input's dtype: its threshold.
    pub split: &'a Tensor,
    /// `[S]` int32: its comparison ([`mode`]).
    pub mode: &'a Tensor,
    /// `[S]` int32: nonzero when a NaN goes to the true branch.
    pub missing_true: &'a Tensor,
    /// `[S]` int32: the successor when the test holds (`>= 0` a node, else `-(leaf + 1)`).
    pub true_next: &'a Tensor,
    /// `[S]` int32: the successor when it does not.
    pub false_next: &'a Tensor,
    /// `[R]` int32: each tree's root (a node, or `-(leaf + 1)`).
    pub roots: &'a Tensor,
    /// `[L]` int32: the target each leaf adds to.
    pub leaf_target: &'a Tensor,
    /// `[L]`, the input's dtype: its weight.
    pub leaf_weight: &'a Tensor,
}

/// The ensemble's `[N, n_targets]` output for `x` `[N, F]`: per row and target, the
/// aggregate of the weights of the leaves the row reaches in the trees (0 for a target no
/// leaf reaches, as onnxruntime gives).
///
/// # Errors
/// A `ValueError` for tables of mismatched lengths, a non-2-D or non-float input, or
/// `n_targets < 1`.
pub fn tree_ensemble(
    x: &Tensor,
    t: &TreeTables<'_>,
    n_targets: i64,
    aggregate: Aggregate,
    depth: i64,
) -> Result<Tensor> {
    let name = "tree_ensemble";
    let xs = const_shape(x, name)?;
    if xs.len() != 2 || !kiln_tir::DataTypeExt::is_floating(x.dtype()) || n_targets < 1 {
        return Err(value_error(
            name,
            format!(
                "the input must be a float [N, F] ({xs:?} {}), n_targets >= 1 ({n_targets})",
                x.dtype()
            ),
        ));
    }
    let len = |e: &Tensor| -> Result<i64> { Ok(const_shape(e, name)?.iter().product()) };
    let s = len(t.feature)?;
    for (what, e) in [
        ("split", t.split),
        ("mode", t.mode),
        ("missing_true", t.missing_true),
        ("true_next", t.true_next),
        ("false_next", t.false_next),
    ] {
        if len(e)? != s {
            return Err(value_error(
                name,
                format!("table `{what}` must have {s} entries"),
            ));
        }
    }
    let leaves = len(t.leaf_target)?;
    if len(t.leaf_weight)? != leaves {
        return Err(value_error(
            name,
            "leaf targets and weights differ in length",
        ));
    }
    let (n, roots) = (xs[0], len(t.roots)?);
    let dt = x.dtype();
    let it = DataType::int(32);
    let c = |v: i64| PrimExpr::const_int(it, v);
    let ins = [
        x.clone(),
        t.feature.clone(),
        t.split.clone(),
        t.mode.clone(),
        t.missing_true.clone(),
        t.true_next.clone(),
        t.false_next.clone(),
        t.roots.clone(),
        t.leaf_target.clone(),
        t.leaf_weight.clone(),
    ];
    let xi = x.shape()[0].dtype();
    let out_shape = vec![
        PrimExpr::const_int(xi, n),
        PrimExpr::const_int(xi, n_targets),
    ];
    let outs = extern_op(
        name,
        "ml",
        &ins,
        &[ExternOutput::new(out_shape, dt)],
        |b, o| {
            let (xb, feat, split, modeb, miss, tn, fnx, rootb, ltar, lw) = (
                &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7], &b[8], &b[9],
            );
            let y = &o[0];
            let acc = Buffer::decl_in("acc", dt, vec![c(n_targets)], "local");
            let cur = Buffer::decl_in("cur", it, vec![c(1)], "local");
            let hit = Buffer::decl_in("hit", it, vec![c(n_targets)], "local");
            let big = match dt.bits() {
                16 => 65504.0,
                32 => f32::MAX as f64,
                _ => f64::MAX,
            };
            let init = match aggregate {
                Aggregate::Sum | Aggregate::Average => 0.0,
                Aggregate::Min => big,
                Aggregate::Max => -big,
            };
            let idx = |e: PrimExpr| cast(it, e);
            let body = for_n("row", it, n, |row| {
                let reset = for_n("t", it, n_targets, |k| {
                    Stmt::seq(vec![
                        acc.store(constant(dt, init), vec![k.clone()]),
                        hit.store(c(0), vec![k]),
                    ])
                });
                let trees = for_n("tree", it, roots, |r| {
                    let start = cur.store(idx(rootb.load(vec![r])), vec![c(0)]);
                    let walk = for_n("step", it, depth, |_| {
                        let s = cur.load(vec![c(0)]);
                        let v = xb.load(vec![
                            cast(xi, row.clone()),
                            cast(xi, idx(feat.load(vec![s.clone()]))),
                        ]);
                        let sp = split.load(vec![s.clone()]);
                        let m = idx(modeb.load(vec![s.clone()]));
                        let test = select(
                            m.equal(c(mode::LEQ)),
                            v.le(sp.clone()),
                            select(
                                m.equal(c(mode::LT)),
                                v.lt(sp.clone()),
                                select(
                                    m.equal(c(mode::GTE)),
                                    v.ge(sp.clone()),
                                    select(
                                        m.equal(c(mode::GT)),
                                        v.gt(sp.clone()),
                                        select(
                                            m.equal(c(mode::EQ)),
                                            v.equal(sp.clone()),
                                            v.not_equal(sp),
                                        ),
                                    ),
                                ),
                            ),
                        );
                        let nan = logical_and(
                            v.not_equal(v.clone()),
                            idx(miss.load(vec![s.clone()])).not_equal(c(0)),
                        );
                        let next = select(
                            logical_or(test, nan),
                            idx(tn.load(vec![s.clone()])),
                            idx(fnx.load(vec![s.clone()])),
                        );
                        Stmt::if_then_else(s.ge(c(0)), cur.store(next, vec![c(0)]), None)
                    });
                    let leaf = c(-1) - cur.load(vec![c(0)]);
                    let tgt = idx(ltar.load(vec![leaf.clone()]));
                    let w = lw.load(vec![leaf]);
                    let old = acc.load(vec![tgt.clone()]);
                    let new = match aggregate {
                        Aggregate::Sum | Aggregate::Average => old + w,
                        Aggregate::Min => kiln_tir::min(old, w),
                        Aggregate::Max => kiln_tir::max(old, w),
                    };
                    Stmt::seq(vec![
                        start,
                        walk,
                        acc.store(new, vec![tgt.clone()]),
                        hit.store(c(1), vec![tgt]),
                    ])
                });
                let write = for_n("t", it, n_targets, |k| {
                    let v = acc.load(vec![k.clone()]);
                    let v = if aggregate == Aggregate::Average {
                        v / constant(dt, roots.max(1) as f64)
                    } else {
                        v
                    };
                    let v = select(
                        hit.load(vec![k.clone()]).not_equal(c(0)),
                        v,
                        constant(dt, 0.0),
                    );
                    y.store(v, vec![cast(xi, row.clone()), cast(xi, k)])
                });
                Stmt::seq(vec![reset, trees, write])
            });
            let body = Stmt::allocate_buffer(&hit, body);
            Ok(Stmt::allocate_buffer(
                &acc,
                Stmt::allocate_buffer(&cur, body),
            ))
        },
    )?;
    Ok(outs.into_iter().next().expect("one output"))
}
