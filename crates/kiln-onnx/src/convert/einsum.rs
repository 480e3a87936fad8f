//! Einsum composed from graph operators: the equation is parsed (explicit or implicit output,
//! `...` broadcast dimensions, spaces allowed), repeated labels within an operand become
//! diagonals (`transpose`, `reshape`, a strided slice), labels no longer needed are summed
//! out (`sum`), and operands are contracted left to right as one `nn.batch_matmul` each
//! (shared labels still needed are the batch, shared labels not needed any more the
//! contraction); a final `transpose` gives the output order.

use kiln_graph::ir::Expr;

use super::{call, shape_of, CResult, Msg};
use crate::Node;

/// The label of broadcast dimension `k` of `...` (outside the letters an equation may use).
fn ellipsis_label(k: usize) -> char {
    char::from_u32(0x100 + k as u32).unwrap_or('\u{100}')
}

/// One term's labels with `...` expanded for an operand of rank `rank`, right-aligned into
/// the `width` broadcast dimensions of the equation.
fn expand_term(term: &str, rank: Option<usize>, width: usize) -> CResult<Vec<char>> {
    let letters = term.replace("...", "");
    if let Some(c) = letters.chars().find(|c| !c.is_ascii_alphabetic()) {
        return Err(Msg(format!(
            "attribute `equation`: unexpected character '{c}' in term '{term}'"
        )));
    }
    let n = letters.chars().count();
    let Some(at) = term.find("...") else {
        if rank.is_some_and(|r| r != n) {
            return Err(Msg(format!(
                "attribute `equation`: term '{term}' has {n} labels for an input of rank {}",
                rank.unwrap_or(0)
            )));
        }
        return Ok(letters.chars().collect());
    };
    let e = match rank {
        Some(r) if r < n => {
            return Err(Msg(format!(
                "attribute `equation`: term '{term}' has more labels than its input's rank {r}"
            )))
        }
        Some(r) => r - n,
        None => width,
    };
    let mut out: Vec<char> = term[..at].chars().collect();
    out.extend((width - e..width).map(ellipsis_label));
    out.extend(term[at + 3..].chars());
    Ok(out)
}

/// The input label lists and the output labels of `equation` for inputs of `ranks`.
fn parse(equation: &str, ranks: &[usize]) -> CResult<(Vec<Vec<char>>, Vec<char>)> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ranks.len() {
        return Err(Msg(format!(
            "attribute `equation` '{equation}' has {} input terms for {} inputs",
            terms.len(),
            ranks.len()
        )));
    }
    let width = terms
        .iter()
        .zip(ranks)
        .filter(|(t, _)| t.contains("..."))
        .map(|(t, &r)| r.saturating_sub(t.replace("...", "").len()))
        .max()
        .unwrap_or(0);
    let inputs = terms
        .iter()
        .zip(ranks)
        .map(|(t, &r)| expand_term(t, Some(r), width))
        .collect::<CResult<Vec<_>>>()?;
    let output = match rhs {
        Some(r) => expand_term(r, None, width)?,
        None => {
            // Implicit: the broadcast dimensions, then the letters used once, sorted.
            let mut out: Vec<char> = (0..width).map(ellipsis_label).collect();
            let mut once: Vec<char> = inputs
                .iter()
                .flatten()
                .copied()
                .filter(|c| c.is_ascii_alphabetic())
                .filter(|c| inputs.iter().flatten().filter(|d| *d == c).count() == 1)
                .collect();
            once.sort_unstable();
            out.extend(once);
            out
        }
    };
    for (k, c) in output.iter().enumerate() {
        if output[..k].contains(c) || !inputs.iter().flatten().any(|d| d == c) {
            return Err(Msg(format!(
                "attribute `equation` '{equation}': output label '{c}' is repeated or unused"
            )));
        }
    }
    Ok((inputs, output))
}

/// A tensor and the label of each of its axes.
#[derive(Clone)]
struct Term {
    e: Expr,
    labels: Vec<char>,
}

impl Term {
    fn shape(&self) -> CResult<Vec<i64>> {
        shape_of(&self.e)
    }

    /// The axes permuted to `order` (labels of this term).
    fn permute(self, order: &[char]) -> CResult<Term> {
        let perm: Vec<i64> = order
            .iter()
            .map(|c| self.labels.iter().position(|d| d == c).unwrap_or(0) as i64)
            .collect();
        if perm.iter().enumerate().all(|(i, &p)| i as i64 == p) {
            return Ok(Term {
                labels: order.to_vec(),
                ..self
            });
        }
        let e = call("transpose", vec![self.e], &[("axes", perm.into())])?;
        Ok(Term {
            e,
            labels: order.to_vec(),
        })
    }

    /// The first pair of equal labels replaced by the diagonal, until no label repeats.
    fn diagonals(mut self) -> CResult<Term> {
        while let Some((p, q)) = (0..self.labels.len()).find_map(|p| {
            (p + 1..self.labels.len())
                .find(|&q| self.labels[q] == self.labels[p])
                .map(|q| (p, q))
        }) {
            let s = self.shape()?;
            let n = s[p];
            if s[q] != n {
                return Err(Msg(format!(
                    "label '{}' has extents {n} and {} in one input",
                    self.labels[p], s[q]
                )));
            }
            let c = self.labels[p];
            let mut order: Vec<char> = Vec::new();
            let mut view: Vec<i64> = Vec::new();
            for (k, &l) in self.labels.iter().enumerate() {
                if k != p && k != q {
                    order.push(l);
                    view.push(s[k]);
                }
            }
            // Move the pair last ([.., i, j]), flatten it and keep every (n + 1)-th element.
            let rest = order.clone();
            let perm: Vec<i64> = (0..s.len())
                .filter(|&k| k != p && k != q)
                .chain([p, q])
                .map(|k| k as i64)
                .collect();
            let t = call("transpose", vec![self.e], &[("axes", perm.into())])?;
            let last = view.len() as i64;
            view.push(n * n);
            let flat = call("reshape", vec![t], &[("newshape", view.into())])?;
            let e = call(
                "strided_slice",
                vec![flat],
                &[
                    ("begin", vec![0i64].into()),
                    ("end", vec![n * n].into()),
                    ("strides", vec![n + 1].into()),
                    ("axes", vec![last].into()),
                ],
            )?;
            let mut labels = rest;
            labels.push(c);
            self = Term { e, labels };
        }
        Ok(self)
    }

    /// Labels not in `needed` summed out.
    fn sum_unneeded(self, needed: &[char]) -> CResult<Term> {
        let axes: Vec<i64> = (0..self.labels.len())
            .filter(|&k| !needed.contains(&self.labels[k]))
            .map(|k| k as i64)
            .collect();
        if axes.is_empty() {
            return Ok(self);
        }
        let labels = self
            .labels
            .iter()
            .copied()
            .filter(|c| needed.contains(c))
            .collect();
        let e = call(
            "sum",
            vec![self.e],
            &[("axis", axes.into()), ("keepdims", false.into())],
        )?;
        Ok(Term { e, labels })
    }

    /// This term broadcast so that every label in `sizes` has that extent.
    fn broadcast(self, sizes: &[(char, i64)]) -> CResult<Term> {
        let s = self.shape()?;
        let want: Vec<i64> = self
            .labels
            .iter()
            .zip(&s)
            .map(|(c, &n)| sizes.iter().find(|(d, _)| d == c).map_or(n, |&(_, m)| m))
            .collect();
        if want == s {
            return Ok(self);
        }
        let e = call("broadcast_to", vec![self.e], &[("shape", want.into())])?;
        Ok(Term { e, ..self })
    }
}

/// `a` and `b` contracted: shared labels in `keep` are the batch, other shared labels are
/// summed; the result's labels are batch, then `a`'s own, then `b`'s own.
fn contract(a: Term, b: Term, keep: &[char]) -> CResult<Term> {
    let (sa, sb) = (a.shape()?, b.shape()?);
    let size = |t: &Term, s: &[i64], c: char| s[t.labels.iter().position(|&d| d == c).unwrap()];
    let shared: Vec<char> = a
        .labels
        .iter()
        .copied()
        .filter(|c| b.labels.contains(c))
        .collect();
    // Shared labels of extent 1 on one side broadcast (`...` dimensions).
    let sizes: Vec<(char, i64)> = shared
        .iter()
        .map(|&c| (c, size(&a, &sa, c).max(size(&b, &sb, c))))
        .collect();
    let (a, b) = (a.broadcast(&sizes)?, b.broadcast(&sizes)?);
    let mut extents: Vec<(char, i64)> = a.labels.iter().copied().zip(a.shape()?).collect();
    extents.extend(b.labels.iter().copied().zip(b.shape()?));
    let ext = |c: char| extents.iter().find(|(d, _)| *d == c).map_or(1, |&(_, n)| n);
    let batch: Vec<char> = shared
        .iter()
        .copied()
        .filter(|c| keep.contains(c))
        .collect();
    let summed: Vec<char> = shared
        .iter()
        .copied()
        .filter(|c| !keep.contains(c))
        .collect();
    let own = |t: &Term| -> Vec<char> {
        t.labels
            .iter()
            .copied()
            .filter(|c| !shared.contains(c))
            .collect()
    };
    let (oa, ob) = (own(&a), own(&b));
    let prod = |ls: &[char]| ls.iter().map(|&c| ext(c)).product::<i64>();
    let (nb, m, n, k) = (prod(&batch), prod(&oa), prod(&ob), prod(&summed));
    let side = |t: Term, own: &[char], rows: i64| -> CResult<Expr> {
        let order: Vec<char> = batch.iter().chain(own).chain(&summed).copied().collect();
        let t = t.permute(&order)?;
        call(
            "reshape",
            vec![t.e],
            &[("newshape", vec![nb, rows, k].into())],
        )
    };
    let (ea, eb) = (side(a, &oa, m)?, side(b, &ob, n)?);
    let mm = call("nn.batch_matmul", vec![ea, eb], &[])?;
    let labels: Vec<char> = batch.iter().chain(&oa).chain(&ob).copied().collect();
    let shape: Vec<i64> = labels.iter().map(|&c| ext(c)).collect();
    let e = call("reshape", vec![mm], &[("newshape", shape.into())])?;
    Ok(Term { e, labels })
}

/// Einsum.
pub(super) fn einsum(ctx: &mut super::Ctx<'_>, node: &Node) -> CResult<Vec<Expr>> {
    let equation = node.attr_s("equation", "")?;
    let inputs = (0..node.inputs.len())
        .map(|i| ctx.input(node, i))
        .collect::<CResult<Vec<_>>>()?;
    if inputs.is_empty() {
        return Err("Einsum needs at least one input".into());
    }
    let ranks = inputs
        .iter()
        .map(|e| Ok(shape_of(e)?.len()))
        .collect::<CResult<Vec<_>>>()?;
    let (labels, output) = parse(&equation, &ranks)?;
    let terms = inputs
        .into_iter()
        .zip(labels)
        .map(|(e, labels)| Term { e, labels }.diagonals())
        .collect::<CResult<Vec<_>>>()?;
    let mut rest = terms;
    let mut acc = rest.remove(0);
    while !rest.is_empty() {
        let b = rest.remove(0);
        let mut keep = output.clone();
        for t in &rest {
            keep.extend(t.labels.iter().copied());
        }
        let mut with_b = keep.clone();
        with_b.extend(b.labels.iter().copied());
        let mut with_a = keep.clone();
        with_a.extend(acc.labels.iter().copied());
        acc = contract(acc.sum_unneeded(&with_b)?, b.sum_unneeded(&with_a)?, &keep)?;
    }
    let acc = acc.sum_unneeded(&output)?;
    Ok(vec![acc.permute(&output)?.e])
}
