//! Bound inference (TVM's `InferBound`): the range of every iteration variable of every stage.
//!
//! Stages are visited consumers first. A stage at the root (or an output) covers its whole
//! domain; a stage attached with `compute_at` covers the union of the regions its consumers
//! read, with the loop variables in scope at the attach point held fixed and every other loop
//! variable relaxed over its range (symbolic interval arithmetic, simplified with the
//! [`Analyzer`]). Ranges then flow down splits and fuses to the leaf loops. A stage in
//! `shared` memory attached inside thread-bound loops covers what all threads of the block
//! read there (the `threadIdx` loops are relaxed too; `global` relaxes `blockIdx` as well).
//!
//! Inlined stages are substituted into their readers first ([`effective_bodies`]), so they have
//! no ranges and their consumers read through them.

use crate::reduce::Reduce;
use crate::schedule::{Attach, Relation, Schedule, ScheduleInner, StageData};
use crate::tensor::{IterVar, OpKind, Tensor};
use kiln_ffi::Result;
use kiln_tir::arith::ConstIntBound;
use kiln_tir::mutator::{substitute, transform_expr};
use kiln_tir::thread_axis::{ThreadRank, ThreadTag};
use kiln_tir::visitor::{post_order_visit_expr, uses_var_where};
use kiln_tir::Analyzer;
use kiln_tir::{floordiv, BinOp, DataTypeExt, ExprKind, PrimExpr, Range, Var};
use std::collections::{HashMap, HashSet};

/// The ranges of every iteration variable of every stage of `sch` (inlined stages and
/// placeholders have none).
pub fn infer_bound(sch: &Schedule) -> Result<Vec<(IterVar, Range)>> {
    let inner = sch.lock();
    let bodies = effective_bodies(&inner);
    let b = Bounds::infer(&inner, &bodies)?;
    let mut out = Vec::new();
    for &s in &inner.order {
        for iv in &inner.stages[s].all_iter_vars {
            if let Some(r) = b.dom.get(iv.var()) {
                out.push((iv.clone(), r.clone()));
            }
        }
    }
    Ok(out)
}

/// Stage id of each operation (by current operation, then by the operation it was created for).
pub(crate) fn op_stage_map(inner: &ScheduleInner) -> HashMap<usize, usize> {
    let mut m = HashMap::new();
    for &s in &inner.order {
        m.entry(inner.stages[s].origin_op.key()).or_insert(s);
    }
    for &s in &inner.order {
        m.insert(inner.stages[s].op.key(), s);
    }
    m
}

/// Each compute stage's bodies with inlined stages substituted (producers first).
pub(crate) fn effective_bodies(inner: &ScheduleInner) -> HashMap<usize, Vec<PrimExpr>> {
    let op_stage = op_stage_map(inner);
    let mut out: HashMap<usize, Vec<PrimExpr>> = HashMap::new();
    for &s in &inner.order {
        let OpKind::Compute(c) = inner.stages[s].op.kind() else {
            continue;
        };
        let bodies = c
            .body
            .iter()
            .map(|b| {
                transform_expr(b, |e| {
                    let ExprKind::BufferLoad { buffer, indices } = e.kind() else {
                        return e;
                    };
                    let Some(t) = Tensor::from_buffer(buffer) else {
                        return e;
                    };
                    let Some(&ps) = op_stage.get(&t.op().key()) else {
                        return e;
                    };
                    if inner.stages[ps].attach != Attach::Inline {
                        return e;
                    }
                    let pc = inner.stages[ps]
                        .op
                        .as_compute()
                        .expect("inlined stage computes");
                    pc.at_indices(&out[&ps][t.value_index()], indices)
                })
            })
            .collect();
        out.insert(s, bodies);
    }
    out
}

/// The loop variables in scope where stage `s` is attached (outermost stages' loops included).
pub(crate) fn scope_vars(inner: &ScheduleInner, s: usize) -> HashSet<Var> {
    let mut out = HashSet::new();
    let mut cur = s;
    let mut guard = 0;
    while let Attach::At { stage, iv } = &inner.stages[cur].attach {
        let p = &inner.stages[*stage];
        for leaf in &p.leaf_iter_vars {
            out.insert(leaf.var().clone());
            if leaf == iv {
                break;
            }
        }
        cur = *stage;
        guard += 1;
        if guard > inner.stages.len() {
            break;
        }
    }
    out
}

/// The value of each root (and intermediate) iteration variable of a stage in terms of its
/// leaf loop variables, whose loops run from 0 (TVM's `PassUpIndex`).
pub(crate) fn pass_up_index(st: &StageData, dom: &HashMap<Var, Range>) -> HashMap<Var, PrimExpr> {
    let mut v: HashMap<Var, PrimExpr> = HashMap::new();
    for leaf in &st.leaf_iter_vars {
        let min = dom[leaf.var()].min().clone();
        let e = if min.is_const_int(0) {
            leaf.expr()
        } else {
            leaf.expr() + min
        };
        v.insert(leaf.var().clone(), e);
    }
    for rel in st.relations.iter().rev() {
        match rel {
            Relation::Split {
                parent,
                outer,
                inner,
                ..
            } => {
                let f = dom[inner.var()].extent();
                let pmin = dom[parent.var()].min();
                let mut e = &v[outer.var()] * f + &v[inner.var()];
                if !pmin.is_const_int(0) {
                    e = e + pmin;
                }
                v.insert(parent.var().clone(), e);
            }
            Relation::Fuse {
                outer,
                inner,
                fused,
            } => {
                let f = &v[fused.var()];
                let ie = dom[inner.var()].extent();
                let o = floordiv(f, ie) + dom[outer.var()].min();
                let i = kiln_tir::floormod(f, ie) + dom[inner.var()].min();
                v.insert(outer.var().clone(), o);
                v.insert(inner.var().clone(), i);
            }
        }
    }
    v
}

/// A symbolic interval `[min, max]` (both ends included).
#[derive(Clone, Debug)]
struct Interval {
    min: PrimExpr,
    max: PrimExpr,
}

impl Interval {
    fn point(e: PrimExpr) -> Interval {
        Interval {
            min: e.clone(),
            max: e,
        }
    }
    fn is_point(&self) -> bool {
        self.min.same_as(&self.max)
    }
}

/// Whether `e` divides or takes a remainder anywhere (floor or truncating).
fn has_division(e: &PrimExpr) -> bool {
    let mut found = false;
    post_order_visit_expr(e, |x| {
        if let ExprKind::Binary(op, ..) = x.kind() {
            found |= matches!(
                op,
                BinOp::FloorDiv | BinOp::FloorMod | BinOp::Div | BinOp::Mod
            );
        }
    });
    found
}

fn relaxed(e: &PrimExpr, relax: &HashMap<Var, Range>) -> bool {
    uses_var_where(e, |v| relax.contains_key(v))
}

/// The interval of `e` when the variables of `relax` range over their ranges.
fn eval_interval(e: &PrimExpr, relax: &HashMap<Var, Range>) -> Interval {
    if !relaxed(e, relax) {
        return Interval::point(e.clone());
    }
    match e.kind() {
        ExprKind::Var(v) => {
            let r = &relax[&v];
            let lo = eval_interval(r.min(), relax).min;
            let hi = eval_interval(&(r.min() + r.extent() - 1), relax).max;
            Interval { min: lo, max: hi }
        }
        ExprKind::Cast(x) => {
            let i = eval_interval(x, relax);
            Interval {
                min: i.min.cast(e.dtype()),
                max: i.max.cast(e.dtype()),
            }
        }
        ExprKind::Binary(op, a, b) => {
            let (ia, ib) = (eval_interval(a, relax), eval_interval(b, relax));
            binary_interval(op, e, ia, ib)
        }
        ExprKind::Select { t, f, .. } => union(eval_interval(t, relax), eval_interval(f, relax)),
        ExprKind::Call { op, args } if op == kiln_tir::op::IF_THEN_ELSE => union(
            eval_interval(&args[1], relax),
            eval_interval(&args[2], relax),
        ),
        _ => everything(e),
    }
}

fn everything(e: &PrimExpr) -> Interval {
    let t = e.dtype();
    Interval {
        min: PrimExpr::const_int(t, t.int_min()),
        max: PrimExpr::const_int(t, t.int_max()),
    }
}

fn union(a: Interval, b: Interval) -> Interval {
    Interval {
        min: kiln_tir::min(a.min, b.min),
        max: kiln_tir::max(a.max, b.max),
    }
}

fn binary_interval(op: BinOp, e: &PrimExpr, a: Interval, b: Interval) -> Interval {
    let c = if b.is_point() { b.min.as_int() } else { None };
    match op {
        BinOp::Add => Interval {
            min: a.min + b.min,
            max: a.max + b.max,
        },
        BinOp::Sub => Interval {
            min: a.min - b.max,
            max: a.max - b.min,
        },
        BinOp::Mul => {
            if let Some(c) = c {
                if c >= 0 {
                    Interval {
                        min: a.min * c,
                        max: a.max * c,
                    }
                } else {
                    Interval {
                        min: a.max * c,
                        max: a.min * c,
                    }
                }
            } else if a.is_point() && a.min.as_int().is_some() {
                binary_interval(op, e, b, a)
            } else {
                let p = [
                    &a.min * &b.min,
                    &a.min * &b.max,
                    &a.max * &b.min,
                    &a.max * &b.max,
                ];
                Interval {
                    min: kiln_tir::min(kiln_tir::min(&p[0], &p[1]), kiln_tir::min(&p[2], &p[3])),
                    max: kiln_tir::max(kiln_tir::max(&p[0], &p[1]), kiln_tir::max(&p[2], &p[3])),
                }
            }
        }
        BinOp::FloorDiv | BinOp::Div if c.is_some_and(|c| c > 0) => Interval {
            min: kiln_tir::expr::build_binary(op, a.min, &b.min),
            max: kiln_tir::expr::build_binary(op, a.max, &b.min),
        },
        BinOp::FloorMod | BinOp::Mod if c.is_some_and(|c| c > 0) => Interval {
            min: PrimExpr::const_int(e.dtype(), 0),
            max: PrimExpr::const_int(e.dtype(), c.unwrap_or(1) - 1),
        },
        BinOp::Min => Interval {
            min: kiln_tir::min(a.min, b.min),
            max: kiln_tir::min(a.max, b.max),
        },
        BinOp::Max => Interval {
            min: kiln_tir::max(a.min, b.min),
            max: kiln_tir::max(a.max, b.max),
        },
        _ => everything(e),
    }
}

/// The ranges of every iteration variable, with the analyzer that knows the loop ranges.
pub(crate) struct Bounds {
    pub dom: HashMap<Var, Range>,
    pub analyzer: Analyzer,
}

fn simplify_range(an: &mut Analyzer, min: &PrimExpr, extent: &PrimExpr) -> Range {
    Range::from_min_extent(an.simplify(min), an.simplify(extent))
}

impl Bounds {
    pub(crate) fn infer(
        inner: &ScheduleInner,
        bodies: &HashMap<usize, Vec<PrimExpr>>,
    ) -> Result<Bounds> {
        let mut b = Bounds {
            dom: HashMap::new(),
            analyzer: Analyzer::new(),
        };
        let op_stage = op_stage_map(inner);
        for &s in inner.order.iter().rev() {
            let st = &inner.stages[s];
            let OpKind::Compute(c) = st.op.kind() else {
                continue;
            };
            if st.attach == Attach::Inline {
                continue;
            }
            let regions = if matches!(st.attach, Attach::At { .. }) && !st.is_output {
                b.consumer_region(inner, bodies, &op_stage, s)
            } else {
                None
            };
            for (d, iv) in c.axis.iter().enumerate() {
                let full = iv.dom().expect("compute axes have domains").clone();
                let r = match &regions {
                    Some(reg) => reg[d].clone(),
                    None => full,
                };
                b.dom.insert(iv.var().clone(), r);
            }
            for iv in c.reduce_axis.iter() {
                let r = iv.dom().expect("reduction axes have domains").clone();
                b.dom.insert(iv.var().clone(), r);
            }
            b.pass_down(st);
        }
        Ok(b)
    }

    /// Ranges of split and fuse results from their parents (TVM's `PassDownDomain`); binds the
    /// leaf loops in the analyzer.
    fn pass_down(&mut self, st: &StageData) {
        for rel in &st.relations {
            match rel {
                Relation::Split {
                    parent,
                    outer,
                    inner,
                    factor,
                    nparts,
                } => {
                    let pe = self.dom[parent.var()].extent().clone();
                    let zero = PrimExpr::const_int(pe.dtype(), 0);
                    let ceil = |a: &PrimExpr, f: &PrimExpr| floordiv(a + f - 1, f);
                    let (oe, ie) = match (factor, nparts) {
                        (Some(f), _) => (ceil(&pe, f), f.clone()),
                        (None, Some(n)) => (n.clone(), ceil(&pe, n)),
                        (None, None) => unreachable!("a split has a factor or nparts"),
                    };
                    let an = &mut self.analyzer;
                    let ro = simplify_range(an, &zero, &oe);
                    let ri = simplify_range(an, &zero, &ie);
                    self.dom.insert(outer.var().clone(), ro);
                    self.dom.insert(inner.var().clone(), ri);
                }
                Relation::Fuse {
                    outer,
                    inner,
                    fused,
                } => {
                    let e = self.dom[outer.var()].extent() * self.dom[inner.var()].extent();
                    let zero = PrimExpr::const_int(e.dtype(), 0);
                    let r = simplify_range(&mut self.analyzer, &zero, &e);
                    self.dom.insert(fused.var().clone(), r);
                }
            }
        }
        for leaf in &st.leaf_iter_vars {
            let r = &self.dom[leaf.var()];
            let loop_range = Range::from_min_extent(
                PrimExpr::const_int(r.extent().dtype(), 0),
                r.extent().clone(),
            );
            self.analyzer.bind(leaf.var(), &loop_range);
        }
    }

    /// The region of stage `s`'s outputs its consumers read, per dimension, relaxing every
    /// loop not in scope at `s`'s attach point. `None` when nothing reads it.
    fn consumer_region(
        &mut self,
        inner: &ScheduleInner,
        bodies: &HashMap<usize, Vec<PrimExpr>>,
        op_stage: &HashMap<usize, usize>,
        s: usize,
    ) -> Option<Vec<Range>> {
        let mut fixed = scope_vars(inner, s);
        // Memory shared by a block's threads (or by all blocks) must cover what every thread
        // of the attach point reads: the thread loops it is shared over are relaxed too
        // (TVM's `NeedRelax` by storage rank).
        let shared_over: &[ThreadRank] = match inner.stages[s].scope.as_str() {
            "shared" => &[ThreadRank::Thread],
            "global" => &[ThreadRank::Thread, ThreadRank::Block],
            _ => &[],
        };
        if inner.stages[s].attach != Attach::Root {
            fixed.retain(|v| {
                !inner.order.iter().any(|&c| {
                    inner.stages[c].bind.get(v).is_some_and(|t| {
                        ThreadTag::parse(t.thread_tag())
                            .is_some_and(|tag| shared_over.contains(&tag.rank))
                    })
                })
            });
        }
        let op_key = inner.stages[s].op.key();
        let mut relax: HashMap<Var, Range> = HashMap::new();
        for &c in &inner.order {
            for leaf in &inner.stages[c].leaf_iter_vars {
                if fixed.contains(leaf.var()) {
                    continue;
                }
                if let Some(r) = self.dom.get(leaf.var()) {
                    let zero = PrimExpr::const_int(r.extent().dtype(), 0);
                    relax.insert(
                        leaf.var().clone(),
                        Range::from_min_extent(zero, r.extent().clone()),
                    );
                }
            }
        }
        let mut acc: Option<Vec<Interval>> = None;
        for &c in &inner.order {
            let Some(cb) = bodies.get(&c) else { continue };
            if inner.stages[c].attach == Attach::Inline || c == s {
                continue;
            }
            let st = &inner.stages[c];
            if !st
                .leaf_iter_vars
                .iter()
                .all(|l| self.dom.contains_key(l.var()))
            {
                continue;
            }
            let values = pass_up_index(st, &self.dom);
            let mut reads: Vec<Vec<PrimExpr>> = Vec::new();
            for body in cb {
                let src = match Reduce::decode(body) {
                    Some(r) => r.source,
                    None => body.clone(),
                };
                post_order_visit_expr(&src, |e| {
                    let ExprKind::BufferLoad { buffer, indices } = e.kind() else {
                        return;
                    };
                    let Some(t) = Tensor::from_buffer(buffer) else {
                        return;
                    };
                    if op_stage.get(&t.op().key()) != Some(&s) && t.op().key() != op_key {
                        return;
                    }
                    reads.push(indices.to_vec());
                });
            }
            for indices in reads {
                // An index through fused loops (`floordiv(f, W)*W + floormod(f, W)`, a row and
                // a column read back as one position) is the fused loop itself once simplified:
                // its interval is then the positions the consumer's loops cover, not whole rows.
                let iv: Vec<Interval> = indices
                    .iter()
                    .map(|i| {
                        let e = substitute(i, &values);
                        let e = if has_division(&e) {
                            self.analyzer.simplify(&e)
                        } else {
                            e
                        };
                        eval_interval(&e, &relax)
                    })
                    .collect();
                acc = Some(match acc.take() {
                    None => iv,
                    Some(prev) => prev.into_iter().zip(iv).map(|(a, b)| union(a, b)).collect(),
                });
            }
        }
        let acc = acc?;
        Some(
            acc.into_iter()
                .map(|iv| {
                    let min = self.analyzer.simplify(&iv.min);
                    let ext = self.analyzer.simplify(&(&iv.max - &min + 1));
                    Range::from_min_extent(min, ext)
                })
                .collect(),
        )
    }

    /// A constant upper bound of `e` (for allocation sizes), if the analyzer finds one below
    /// the int32 limit (a size known only at run time is bounded by that limit alone, and is
    /// no size to allocate).
    pub(crate) fn const_upper(&self, e: &PrimExpr) -> Option<i64> {
        let b: ConstIntBound = self.analyzer.const_int_bound(e);
        (b.max < i64::from(i32::MAX)).then_some(b.max)
    }
}
