//! TfIdfVectorizer over integer tokens: the n-gram counts of each row (`[C]` or `[N, C]`),
//! one output column per pool n-gram (`ngram_indexes`), weighted as TF, IDF or TFIDF.
//!
//! An n-gram of size `n` with skip distance `d` starting at `s` reads tokens `s, s + d, ...,
//! s + (n - 1) d`; sizes from `min_gram_length` to `max_gram_length` are counted with every
//! distance from 1 to `max_skip_count + 1`, unigrams only once (as ONNX's reference and
//! onnxruntime count them). Per size and distance, the counts of all pool n-grams of that size
//! are one comparison of shifted slices of the row against the pool (a constant), reduced over
//! the positions; a constant one-hot matrix then places each n-gram's count in its column.
//! String tokens (`pool_strings`) are not supported.

use std::collections::HashMap;

use kiln_ffi::dtype::code;
use kiln_graph::ir::Expr;

use super::conv::slice_axis;
use super::generate::MAX_ELEMENTS;
use super::{call, constant, dtype_of, shape_of, CResult, ConvertFn, Ctx, Msg};
use crate::Node;

fn tfidf(ctx: &mut Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let x = ctx.input(node, 0)?;
    let xs = shape_of(&x)?;
    let xd = dtype_of(&x)?;
    if !(1..=2).contains(&xs.len()) || !matches!(xd.code(), code::INT | code::UINT) {
        return Err(Msg(format!(
            "the input must be integer tokens [C] or [N, C], got {xd} {xs:?} (string tokens are \
             not supported)"
        )));
    }
    let pool = node.opt_ints("pool_int64s")?.ok_or_else(|| {
        Msg("attribute `pool_int64s` is missing (string pools are not supported)".into())
    })?;
    let counts = node.attr_ints("ngram_counts", &[])?;
    let indexes = node.attr_ints("ngram_indexes", &[])?;
    let (min_n, max_n) = (
        node.attr_i("min_gram_length", 1)?,
        node.attr_i("max_gram_length", 1)?,
    );
    let max_skip = node.attr_i("max_skip_count", 0)?;
    let mode = node.attr_s("mode", "TF")?;
    if min_n < 1 || max_n < min_n || max_skip < 0 || indexes.is_empty() {
        return Err(Msg(format!(
            "gram lengths {min_n}..{max_n}, max_skip_count {max_skip} and ngram_indexes \
             ({} entries) are out of range",
            indexes.len()
        )));
    }
    if let Some(bad) = indexes.iter().find(|&&i| i < 0) {
        return Err(Msg(format!(
            "attribute `ngram_indexes` has a negative entry {bad}"
        )));
    }
    let columns = indexes.iter().copied().max().unwrap_or(0) + 1;
    // The one-hot placement matrices ([n-grams, columns]) and an all-zero result ([rows,
    // columns]) are materialized at compile time: a bounded size.
    let rows: i64 = xs[..xs.len() - 1].iter().product();
    let largest = columns.checked_mul(rows.max(pool.len() as i64).max(1));
    if largest.is_none_or(|n| n > MAX_ELEMENTS) {
        return Err(Msg(format!(
            "attribute `ngram_indexes` asks for {columns} output columns, more than Kiln \
             materializes ({MAX_ELEMENTS} elements)"
        )));
    }
    let c = *xs.last().expect("rank >= 1");
    let f32t = kiln_ffi::DataType::float(32);
    // The pool's n-grams by size, each with its global index (the output column's index).
    let mut grams: Vec<(i64, Vec<i64>, usize)> = Vec::new(); // (size, tokens, first id)
    let mut id = 0usize;
    for (i, &start) in counts.iter().enumerate() {
        let end = counts.get(i + 1).copied().unwrap_or(pool.len() as i64);
        let size = i as i64 + 1;
        if start < 0 || end < start || end as usize > pool.len() || (end - start) % size != 0 {
            return Err(Msg(format!(
                "ngram_counts {counts:?} do not split the pool of {} tokens by size",
                pool.len()
            )));
        }
        grams.push((size, pool[start as usize..end as usize].to_vec(), id));
        id += ((end - start) / size) as usize;
    }
    if id > indexes.len() {
        return Err(Msg(format!(
            "the pool holds {id} n-grams but ngram_indexes has {} entries",
            indexes.len()
        )));
    }
    let mut total: Option<Expr> = None;
    for (size, tokens, first) in &grams {
        let (n, e) = (*size, tokens.len() as i64 / size);
        if e == 0 || n < min_n || n > max_n {
            continue;
        }
        let mut per_size: Option<Expr> = None;
        let distances = if n == 1 { 1 } else { max_skip + 1 };
        for d in 1..=distances {
            let l = c - d * (n - 1);
            if l <= 0 {
                continue;
            }
            let mut all: Option<Expr> = None;
            for k in 0..n {
                let shifted = slice_axis(x.clone(), -1, k * d, l, 1)?;
                let shifted = call("expand_dims", vec![shifted], &[("axis", (-2i64).into())])?;
                let col: Vec<f64> = (0..e)
                    .map(|g| tokens[(g * n + k) as usize] as f64)
                    .collect();
                let want = constant(&col, &[e, 1], xd)?;
                let eq = call("equal", vec![shifted, want], &[])?;
                all = Some(match all {
                    None => eq,
                    Some(a) => call("logical_and", vec![a, eq], &[])?,
                });
            }
            let hits = call(
                "cast",
                vec![all.expect("n >= 1")],
                &[("dtype", "float32".into())],
            )?;
            let count = call(
                "sum",
                vec![hits],
                &[("axis", vec![-1i64].into()), ("keepdims", false.into())],
            )?;
            per_size = Some(match per_size {
                None => count,
                Some(p) => call("add", vec![p, count], &[])?,
            });
        }
        let Some(per_size) = per_size else {
            continue;
        };
        // Columns of this size's n-grams.
        let mut onehot = vec![0.0; (e * columns) as usize];
        for g in 0..e as usize {
            let col = indexes[first + g];
            onehot[g * columns as usize + col as usize] = 1.0;
        }
        let placed = super::nn::matmul_of(per_size, constant(&onehot, &[e, columns], f32t)?)?;
        total = Some(match total {
            None => placed,
            Some(t) => call("add", vec![t, placed], &[])?,
        });
    }
    let mut out_shape = xs[..xs.len() - 1].to_vec();
    out_shape.push(columns);
    let counts = match total {
        Some(t) => t,
        None => constant(
            &vec![0.0; out_shape.iter().product::<i64>() as usize],
            &out_shape,
            f32t,
        )?,
    };
    let weights: Option<Vec<f64>> = node
        .opt_floats("weights")?
        .map(|w| w.iter().map(|&v| v as f64).collect());
    // Weights are per pool n-gram (as onnxruntime reads them): n-gram `g`'s weight goes to
    // its column `ngram_indexes[g]`.
    let weight_row = |w: &Vec<f64>| -> CResult<Expr> {
        let mut row = vec![1.0; columns as usize];
        for (g, v) in w.iter().enumerate().take(indexes.len()) {
            row[indexes[g] as usize] = *v;
        }
        constant(&row, &[columns], f32t)
    };
    let y = match mode.as_str() {
        "TF" => counts,
        "IDF" => {
            let seen = call(
                "cast",
                vec![call(
                    "greater",
                    vec![counts, super::scalar(0.0, f32t)?],
                    &[],
                )?],
                &[("dtype", "float32".into())],
            )?;
            match &weights {
                Some(w) => call("multiply", vec![seen, weight_row(w)?], &[])?,
                None => seen,
            }
        }
        "TFIDF" => match &weights {
            Some(w) => call("multiply", vec![counts, weight_row(w)?], &[])?,
            None => counts,
        },
        m => {
            return Err(Msg(format!(
                "attribute `mode` must be TF, IDF or TFIDF, got `{m}`"
            )))
        }
    };
    Ok(vec![y])
}

/// Registers TfIdfVectorizer.
pub(super) fn register(t: &mut HashMap<&'static str, ConvertFn>) {
    t.insert("TfIdfVectorizer", tfidf);
}
