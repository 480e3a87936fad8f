//! The numeric operators of the `ai.onnx.ml` domain: Binarizer, ArrayFeatureExtractor and
//! TreeEnsemble (opset 5), whose trees become the flat constant tables of
//! `kiln_topi::ml::tree_ensemble` (set-membership tests expanded into chains of equality tests).

use std::collections::HashMap;

use kiln_graph::ir::Expr;

use super::{call, constant, dtype_of, scalar, shape_of, CResult, ConvertFn, Ctx, Msg};
use crate::Node;

fn binarizer(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let d = dtype_of(&x)?;
    let t = node.attr_f("threshold", 0.0)? as f64;
    let above = call("greater", vec![x, scalar(t, d)?], &[])?;
    Ok(vec![call(
        "cast",
        vec![above],
        &[("dtype", d.to_string().as_str().into())],
    )?])
}

fn array_feature_extractor(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let idx = ctx.input(node, 1)?;
    Ok(vec![call(
        "take",
        vec![x, idx],
        &[("axis", (-1i64).into())],
    )?])
}

/// One interior node of the flattened trees.
#[derive(Clone)]
struct Slot {
    feature: i64,
    split: f64,
    mode: i64,
    missing_true: bool,
    true_next: i64,
    false_next: i64,
}

/// A successor as the tables spell it: a node index, or `-(leaf + 1)`.
fn next(id: i64, is_leaf: bool) -> i64 {
    if is_leaf {
        -(id + 1)
    } else {
        id
    }
}

/// The longest walk (in tests) from `at`.
fn depth(slots: &[Slot], at: i64, seen: &mut Vec<u8>) -> CResult<i64> {
    if at < 0 {
        return Ok(0);
    }
    let i = at as usize;
    if seen[i] == 1 {
        return Err(Msg(format!("the trees have a cycle through node {i}")));
    }
    seen[i] = 1;
    let d =
        1 + depth(slots, slots[i].true_next, seen)?.max(depth(slots, slots[i].false_next, seen)?);
    seen[i] = 0;
    Ok(d)
}

fn tree_ensemble(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let d = dtype_of(&x)?;
    if xs.len() != 2 {
        return Err(Msg(format!("the input must be [N, features], got {xs:?}")));
    }
    let ints = |name: &str| -> CResult<Vec<i64>> {
        node.opt_ints(name)?
            .ok_or_else(|| Msg(format!("attribute `{name}` is missing")))
    };
    let floats = |name: &str| -> CResult<Option<Vec<f64>>> {
        Ok(node.opt_tensor(name)?.map(|t| t.to_f64_vec()))
    };
    let feature = ints("nodes_featureids")?;
    let n = feature.len();
    let splits =
        floats("nodes_splits")?.ok_or_else(|| Msg("attribute `nodes_splits` is missing".into()))?;
    let modes: Vec<i64> = floats("nodes_modes")?
        .ok_or_else(|| Msg("attribute `nodes_modes` is missing".into()))?
        .into_iter()
        .map(|v| v as i64)
        .collect();
    let (tn, tl, fnx, fl) = (
        ints("nodes_truenodeids")?,
        ints("nodes_trueleafs")?,
        ints("nodes_falsenodeids")?,
        ints("nodes_falseleafs")?,
    );
    let missing = node
        .opt_ints("nodes_missing_value_tracks_true")?
        .unwrap_or_else(|| vec![0; n]);
    let roots = ints("tree_roots")?;
    let leaf_target = ints("leaf_targetids")?;
    let leaf_weight =
        floats("leaf_weights")?.ok_or_else(|| Msg("attribute `leaf_weights` is missing".into()))?;
    let n_targets = node.attr_i("n_targets", 0)?;
    for (what, len) in [
        ("nodes_splits", splits.len()),
        ("nodes_modes", modes.len()),
        ("nodes_truenodeids", tn.len()),
        ("nodes_trueleafs", tl.len()),
        ("nodes_falsenodeids", fnx.len()),
        ("nodes_falseleafs", fl.len()),
        ("nodes_missing_value_tracks_true", missing.len()),
    ] {
        if len != n {
            return Err(Msg(format!(
                "attribute `{what}` has {len} entries, `nodes_featureids` has {n}"
            )));
        }
    }
    let leaves = leaf_target.len() as i64;
    if leaf_weight.len() as i64 != leaves || n_targets < 1 {
        return Err(Msg(format!(
            "leaf_targetids ({leaves}) and leaf_weights ({}) must match, n_targets ({n_targets}) be >= 1",
            leaf_weight.len()
        )));
    }
    let check = |id: i64, leaf: bool, at: usize| -> CResult<()> {
        let bound = if leaf { leaves } else { n as i64 };
        if id < 0 || id >= bound {
            return Err(Msg(format!(
                "node {at}: successor {id} is not a {} (there are {bound})",
                if leaf { "leaf" } else { "node" }
            )));
        }
        Ok(())
    };
    let mut slots = Vec::with_capacity(n);
    for i in 0..n {
        check(tn[i], tl[i] != 0, i)?;
        check(fnx[i], fl[i] != 0, i)?;
        if feature[i] < 0 || feature[i] >= xs[1] || !(0..=6).contains(&modes[i]) {
            return Err(Msg(format!(
                "node {i}: feature {} (of {}) or mode {} is out of range",
                feature[i], xs[1], modes[i]
            )));
        }
        slots.push(Slot {
            feature: feature[i],
            split: splits[i],
            mode: modes[i],
            missing_true: missing[i] != 0,
            true_next: next(tn[i], tl[i] != 0),
            false_next: next(fnx[i], fl[i] != 0),
        });
    }
    // Set membership: each MEMBER node's set is the next NaN-terminated run of
    // membership_values; the node becomes a chain of equality tests.
    let members = floats("membership_values")?.unwrap_or_default();
    let mut sets = members.split(|v| v.is_nan());
    for i in 0..n {
        if slots[i].mode != 6 {
            continue;
        }
        let set: Vec<f64> = sets
            .next()
            .ok_or_else(|| Msg(format!("node {i}: no membership set left for it")))?
            .to_vec();
        let (yes, no) = (slots[i].true_next, slots[i].false_next);
        let values = if set.is_empty() { vec![f64::NAN] } else { set };
        let mut tail = no;
        for (k, &v) in values.iter().enumerate().rev() {
            let s = Slot {
                feature: slots[i].feature,
                split: v,
                mode: 4,
                missing_true: k == 0 && slots[i].missing_true,
                true_next: yes,
                false_next: tail,
            };
            if k == 0 {
                slots[i] = s;
            } else {
                slots.push(s);
                tail = slots.len() as i64 - 1;
            }
        }
    }
    let root_ids: Vec<i64> = roots
        .iter()
        .map(|&r| {
            if r < 0 || r >= n as i64 {
                return Err(Msg(format!("tree root {r} is not a node (there are {n})")));
            }
            let i = r as usize;
            // A root whose two branches are the same leaf is that leaf.
            Ok(if tl[i] != 0 && fl[i] != 0 && tn[i] == fnx[i] {
                -(tn[i] + 1)
            } else {
                r
            })
        })
        .collect::<CResult<_>>()?;
    if let Some(&t) = leaf_target.iter().find(|&&t| t < 0 || t >= n_targets) {
        return Err(Msg(format!("leaf target {t} is outside [0, {n_targets})")));
    }
    let mut seen = vec![0u8; slots.len()];
    let mut max_depth = 0;
    for &r in &root_ids {
        max_depth = max_depth.max(depth(&slots, r, &mut seen)?);
    }
    let i32t = kiln_ffi::DataType::int(32);
    let s = slots.len() as i64;
    let col = |f: &dyn Fn(&Slot) -> f64, dtype| {
        constant(&slots.iter().map(f).collect::<Vec<_>>(), &[s], dtype)
    };
    let as_f = |v: &[i64]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    let aggregate = node.attr_i("aggregate_function", 1)?;
    if !(0..=3).contains(&aggregate) {
        return Err(Msg(format!("aggregate_function {aggregate} is not 0-3")));
    }
    let args = vec![
        x,
        col(&|s| s.feature as f64, i32t)?,
        col(&|s| s.split, d)?,
        col(&|s| s.mode as f64, i32t)?,
        col(&|s| s.missing_true as i64 as f64, i32t)?,
        col(&|s| s.true_next as f64, i32t)?,
        col(&|s| s.false_next as f64, i32t)?,
        constant(&as_f(&root_ids), &[root_ids.len() as i64], i32t)?,
        constant(&as_f(&leaf_target), &[leaves], i32t)?,
        constant(&leaf_weight, &[leaves], d)?,
    ];
    let y = call(
        "ml.tree_ensemble",
        args,
        &[
            ("n_targets", n_targets.into()),
            ("aggregate", aggregate.into()),
            ("depth", max_depth.max(1).into()),
        ],
    )?;
    let y = match node.attr_i("post_transform", 0)? {
        0 => y,
        1 => call("nn.softmax", vec![y], &[("axis", 1i64.into())])?,
        2 => call("sigmoid", vec![y], &[])?,
        p => {
            return Err(Msg(format!(
                "post_transform {p} (SOFTMAX_ZERO or PROBIT) is not supported"
            )))
        }
    };
    Ok(vec![y])
}

/// Registers the `ai.onnx.ml` converters (keys spelled `ai.onnx.ml.Op`).
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("ai.onnx.ml.Binarizer", binarizer);
    t.insert("ai.onnx.ml.ArrayFeatureExtractor", array_feature_extractor);
    t.insert("ai.onnx.ml.TreeEnsemble", tree_ensemble);
}
