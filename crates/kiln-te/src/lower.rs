//! Lowering a schedule to a `tir.PrimFunc` (TVM's `ScheduleOps` + `MakeLoopNest` +
//! `SchedulePostProcToPrimFunc`, for the primitives Kiln has).
//!
//! - Each root stage becomes a loop nest over its leaf iteration variables (loops from 0; a
//!   root variable's value is rebuilt from the leaves through splits and fuses), in producer
//!   order; stages attached with `compute_at` are emitted inside their attach loop, before the
//!   consumer's body.
//! - A split whose extent is not provably covered gets a guard `if likely(v < extent)` around
//!   the store.
//! - A reduction is initialised with its identity just outside its first reduction loop (with
//!   its own copies of the data-parallel loops inside that point) and updated innermost.
//! - Every stage that is not a function argument gets `Allocate` + `DeclBuffer` of its bounded
//!   region (multi-dimensional, in the stage's scope) around its producer and consumers; reads
//!   of it are shifted by the region's minimum. Nothing is flattened here.
//! - A loop bound to a thread axis ([`crate::Stage::bind`]) becomes `AttrStmt(thread,
//!   "thread_extent", extent, body)` with the loop variable replaced by the thread variable;
//!   stages bound to the same tag share one variable (the first bound axis's).
//! - Inlined stages are already substituted ([`crate::bound::effective_bodies`]).

use crate::bound::{effective_bodies, op_stage_map, pass_up_index, Bounds};
use crate::extern_op::ExternOpObj;
use crate::reduce::Reduce;
use crate::schedule::{is_reduce_iv, Attach, Schedule, ScheduleInner};
use crate::tensor::{IterVar, OpKind, Tensor};
use kiln_ffi::{Error, Result};
use kiln_tir::mutator::{substitute, substitute_stmt, transform_expr, transform_stmt};
use kiln_tir::op::likely;
use kiln_tir::thread_axis::THREAD_EXTENT;
use kiln_tir::{logical_and, Buffer, ExprKind, ForKind, PrimExpr, PrimFunc, Stmt, StmtKind, Var};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

/// Lowers `sch` to a function named `name` whose parameters are `args` (one handle parameter
/// per tensor, bound to a buffer of the tensor's shape; `global_symbol = name`).
///
/// ```
/// use kiln_te::*;
/// use kiln_tir::{DataType, PrimExpr};
/// let a = placeholder(&[PrimExpr::i32(8)], DataType::float(32), "A");
/// let b = compute(&[PrimExpr::i32(8)], |i| a.at_vars(i) + 1.0, "B");
/// let s = create_schedule(&[b.op().clone()]);
/// let f = lower(&s, &[a, b], "add_one").unwrap();
/// assert!(f.to_string().contains("B[i] = A[i] + T.float32(1.0)"));
/// ```
pub fn lower(sch: &Schedule, args: &[Tensor], name: &str) -> Result<PrimFunc> {
    let inner = sch.lock();
    let bodies = effective_bodies(&inner);
    let bounds = Bounds::infer(&inner, &bodies)?;
    let mut l = Lower {
        inner: &inner,
        bodies,
        op_stage: op_stage_map(&inner),
        b: bounds,
        bufs: HashMap::new(),
        args: HashSet::new(),
        attached: HashMap::new(),
        thread_vars: RefCell::new(HashMap::new()),
        error: RefCell::new(None),
    };
    let mut arg_bufs = Vec::new();
    for t in args {
        let Some(&s) = l.op_stage.get(&t.op().key()) else {
            // An input the computes do not read (only its extents, say) is still a parameter.
            if matches!(t.op().kind(), crate::tensor::OpKind::Placeholder(_)) {
                arg_bufs.push(Buffer::decl(t.name(), t.dtype(), t.shape().to_vec()));
                continue;
            }
            return Err(Error::value_error(format!(
                "lower `{name}`: argument `{}` is not computed by the schedule",
                t.name()
            )));
        };
        let buf = Buffer::decl(t.name(), t.dtype(), t.shape().to_vec());
        let zeros = t
            .shape()
            .iter()
            .map(|d| PrimExpr::const_int(d.dtype(), 0))
            .collect();
        l.bufs.insert((s, t.value_index()), (buf.clone(), zeros));
        l.args.insert((s, t.value_index()));
        arg_bufs.push(buf);
    }
    l.realize_buffers();
    for &s in &inner.order {
        if let Attach::At { iv, .. } = &inner.stages[s].attach {
            l.attached.entry(iv.var().clone()).or_default().push(s);
        }
    }
    let roots: Vec<usize> = inner
        .order
        .iter()
        .copied()
        .filter(|&s| {
            let st = &inner.stages[s];
            !st.is_placeholder() && st.attach == Attach::Root
        })
        .collect();
    let mut body = Stmt::no_op();
    for &s in roots.iter().rev() {
        let nest = l.make_stage(s)?;
        body = l.allocate(s, Stmt::seq(vec![nest, body]));
    }
    if let Some(e) = l.error.take() {
        return Err(e);
    }
    Ok(PrimFunc::from_buffers(name, &arg_bufs, body))
}

struct Lower<'a> {
    inner: &'a ScheduleInner,
    bodies: HashMap<usize, Vec<PrimExpr>>,
    op_stage: HashMap<usize, usize>,
    b: Bounds,
    /// The buffer of each (stage, output) and the minimum of its region per dimension.
    bufs: HashMap<(usize, usize), (Buffer, Vec<PrimExpr>)>,
    args: HashSet<(usize, usize)>,
    attached: HashMap<Var, Vec<usize>>,
    /// One thread variable per thread tag: stages bound to the same tag share it.
    thread_vars: RefCell<HashMap<String, Var>>,
    error: RefCell<Option<Error>>,
}

impl Lower<'_> {
    /// Buffers for every computed stage output that is not an argument.
    fn realize_buffers(&mut self) {
        for &s in &self.inner.order {
            let st = &self.inner.stages[s];
            if let OpKind::Extern(e) = st.op.kind() {
                for (k, ph) in e.output_placeholders.iter().enumerate() {
                    if self.args.contains(&(s, k)) {
                        continue;
                    }
                    let t = st.origin_op.output(k);
                    let buf = Buffer::decl_in(t.name(), t.dtype(), ph.shape().to_vec(), &st.scope);
                    let zeros = ph
                        .shape()
                        .iter()
                        .map(|d| PrimExpr::const_int(d.dtype(), 0))
                        .collect();
                    self.bufs.insert((s, k), (buf, zeros));
                }
                continue;
            }
            let OpKind::Compute(c) = st.op.kind() else {
                continue;
            };
            if st.attach == Attach::Inline {
                continue;
            }
            for k in 0..c.body.len() {
                if self.args.contains(&(s, k)) {
                    continue;
                }
                let mut shape = Vec::new();
                let mut mins = Vec::new();
                for iv in c.axis.iter() {
                    let r = &self.b.dom[iv.var()];
                    let ext = r.extent();
                    let dim = if ext.as_int().is_some() {
                        ext.clone()
                    } else if let Some(u) = self.b.const_upper(ext) {
                        PrimExpr::const_int(ext.dtype(), u)
                    } else {
                        ext.clone()
                    };
                    shape.push(dim);
                    mins.push(r.min().clone());
                }
                let t = st.origin_op.output(k);
                let buf = Buffer::decl_in(t.name(), t.dtype(), shape, &st.scope);
                self.bufs.insert((s, k), (buf, mins));
            }
        }
    }

    /// Wraps `body` in the allocations of stage `s`'s non-argument outputs.
    fn allocate(&self, s: usize, mut body: Stmt) -> Stmt {
        let n = self.inner.stages[s].op.num_outputs();
        for k in (0..n).rev() {
            if self.args.contains(&(s, k)) {
                continue;
            }
            if let Some((buf, _)) = self.bufs.get(&(s, k)) {
                body = Stmt::allocate_buffer(buf, body);
            }
        }
        body
    }

    /// Replaces tensor reads in `e` by reads of their buffers, shifted by the region minimum.
    fn lower_loads(&self, e: &PrimExpr) -> PrimExpr {
        transform_expr(e, |x| {
            let ExprKind::BufferLoad { buffer, indices } = x.kind() else {
                return x;
            };
            let Some(t) = Tensor::from_buffer(buffer) else {
                return x;
            };
            let key = self
                .op_stage
                .get(&t.op().key())
                .map(|&s| (s, t.value_index()));
            // An inlined stage read by an extern body (compute bodies have them substituted
            // already): its expression at these indices, lowered in turn.
            if let Some((s, k)) = key {
                let st = &self.inner.stages[s];
                if st.attach == Attach::Inline {
                    if let (Some(c), Some(bodies)) = (st.op.as_compute(), self.bodies.get(&s)) {
                        return self.lower_loads(&c.at_indices(&bodies[k], indices));
                    }
                }
            }
            match key.and_then(|k| self.bufs.get(&k)) {
                Some((buf, mins)) => {
                    let idx = indices
                        .iter()
                        .zip(mins)
                        .map(|(i, m)| self.shift(i, m))
                        .collect();
                    buf.load(idx)
                }
                None => {
                    self.error.borrow_mut().get_or_insert_with(|| {
                        Error::value_error(format!(
                            "lower: tensor `{}` is read but is neither an argument nor computed \
                             by the schedule",
                            t.name()
                        ))
                    });
                    x
                }
            }
        })
    }

    fn shift(&self, i: &PrimExpr, min: &PrimExpr) -> PrimExpr {
        if min.is_const_int(0) {
            i.clone()
        } else {
            let mut an = self.b.analyzer.clone();
            an.simplify(&(i - min))
        }
    }

    /// The body of extern stage `s`: its statement with the output placeholders replaced by
    /// the outputs' buffers and input tensor reads by reads of theirs.
    fn make_extern(&self, s: usize, e: &ExternOpObj) -> Stmt {
        let real = |b: &Buffer| {
            e.output_placeholders
                .iter()
                .position(|p| p.same_as(b))
                .map(|k| self.bufs[&(s, k)].0.clone())
        };
        transform_stmt(
            &e.body,
            |st| match st.kind() {
                StmtKind::BufferStore(n) => match real(&n.buffer) {
                    Some(b) => Stmt::buffer_store_raw(b, n.value.clone(), n.indices.to_vec()),
                    None => st,
                },
                _ => st,
            },
            |x| {
                let ExprKind::BufferLoad { buffer, indices } = x.kind() else {
                    return x;
                };
                match real(buffer) {
                    Some(b) => PrimExpr::buffer_load_raw(b, indices.to_vec()),
                    None => self.lower_loads(&x),
                }
            },
        )
    }

    /// The loop nest of stage `s`, with the stages attached to its loops inside.
    fn make_stage(&self, s: usize) -> Result<Stmt> {
        let st = &self.inner.stages[s];
        if let OpKind::Extern(e) = st.op.kind() {
            return Ok(self.make_extern(s, e));
        }
        let c = st
            .op
            .as_compute()
            .expect("only compute and extern stages are lowered");
        let values = pass_up_index(st, &self.b.dom);
        let mut an = self.b.analyzer.clone();
        let roots: Vec<&IterVar> = c.axis.iter().chain(c.reduce_axis.iter()).collect();
        let vmap: HashMap<Var, PrimExpr> = roots
            .iter()
            .map(|iv| (iv.var().clone(), an.simplify(&values[iv.var()])))
            .collect();
        // Guards for roots whose value may pass the end of their range.
        let mut data_conds = Vec::new();
        let mut red_conds = Vec::new();
        for iv in &roots {
            let v = &vmap[iv.var()];
            let mut conds = Vec::new();
            if !st.leaf_iter_vars.contains(iv) {
                let r = &self.b.dom[iv.var()];
                conds.push(v.lt(an.simplify(&(r.min() + r.extent()))));
            }
            // A stage computed at a consumer's tile covers that tile, which may reach past the
            // stage's own domain (a ragged last tile): check the original domain too (TVM's
            // `MakeBoundCheck`), so no point outside it is computed (or read from inputs).
            if let Some(orig) = iv.dom() {
                conds.push(v.ge(orig.min()));
                conds.push(v.lt(an.simplify(&(orig.min() + orig.extent()))));
            }
            for cond in conds {
                let cond = an.simplify(&cond);
                let seen = |cs: &Vec<PrimExpr>| {
                    cs.iter()
                        .any(|c| kiln_tir::structural::structural_equal(c, &likely(cond.clone())))
                };
                if an.can_prove(&cond) || seen(&data_conds) || seen(&red_conds) {
                    continue;
                }
                if iv.is_reduce() {
                    red_conds.push(likely(cond));
                } else {
                    data_conds.push(likely(cond));
                }
            }
        }
        let bodies = &self.bodies[&s];
        let mut stores = Vec::new();
        let mut inits = Vec::new();
        let mut red_cond: Option<PrimExpr> = None;
        for (k, body) in bodies.iter().enumerate() {
            let (buf, mins) = &self.bufs[&(s, k)];
            let idx: Vec<PrimExpr> = c
                .axis
                .iter()
                .zip(mins)
                .map(|(iv, m)| self.shift(&vmap[iv.var()], m))
                .collect();
            match Reduce::decode(body) {
                Some(r) => {
                    let src = self.lower_loads(&substitute(&r.source, &vmap));
                    let acc = buf.load(idx.clone());
                    stores.push(buf.store(r.combine(&acc, &src), idx.clone()));
                    inits.push(buf.store(r.identity.clone(), idx));
                    if !r.condition.is_const_int(1) {
                        red_cond = Some(self.lower_loads(&substitute(&r.condition, &vmap)));
                    }
                }
                None => {
                    let v = self.lower_loads(&substitute(body, &vmap));
                    stores.push(buf.store(v, idx));
                }
            }
        }
        let guard = |conds: Vec<PrimExpr>, body: Stmt| match conds.into_iter().reduce(logical_and) {
            Some(c) => Stmt::if_then_else(c, body, None),
            None => body,
        };
        let is_reduce = !c.reduce_axis.is_empty();
        let provide = if is_reduce {
            let mut conds = data_conds.clone();
            conds.extend(red_conds);
            conds.extend(red_cond);
            guard(conds, Stmt::seq(stores))
        } else {
            guard(data_conds.clone(), Stmt::seq(stores))
        };
        let leaves = &st.leaf_iter_vars;
        let first_red = if is_reduce {
            leaves.iter().position(is_reduce_iv)
        } else {
            None
        };
        if let Some(r) = first_red {
            if let Some(iv) = leaves[r..].iter().find(|iv| st.bind.contains_key(iv.var())) {
                return Err(Error::value_error(format!(
                    "lower: stage `{}`: loop `{}` is bound to `{}` inside reduction loop `{}`; \
                     bind only loops outside the reduction loops",
                    st.op.name(),
                    iv.name(),
                    st.bind[iv.var()].thread_tag(),
                    leaves[r].name()
                )));
            }
        }
        let init = first_red.map(|r| self.init_nest(s, r, guard(data_conds, Stmt::seq(inits))));
        let mut stmt = provide;
        for pos in (0..leaves.len()).rev() {
            stmt = self.with_attached(leaves[pos].var(), stmt)?;
            stmt = self.make_for(s, &leaves[pos], stmt);
            if first_red == Some(pos) {
                stmt = Stmt::seq(vec![init.clone().expect("init exists"), stmt]);
            }
        }
        if is_reduce && first_red.is_none() {
            return Err(Error::value_error(format!(
                "lower: stage `{}` reduces but has no reduction loop",
                st.op.name()
            )));
        }
        Ok(stmt)
    }

    /// The initialisation of a reduction placed before leaf loop `r`: the data-parallel loops
    /// inside that point, with fresh variables.
    fn init_nest(&self, s: usize, r: usize, init: Stmt) -> Stmt {
        let st = &self.inner.stages[s];
        let inner_data: Vec<&IterVar> = st.leaf_iter_vars[r..]
            .iter()
            .filter(|iv| !iv.is_reduce())
            .collect();
        let fresh: HashMap<Var, PrimExpr> = inner_data
            .iter()
            .map(|iv| {
                (
                    iv.var().clone(),
                    iv.var().copy_with_name(iv.name()).to_expr(),
                )
            })
            .collect();
        let mut stmt = substitute_stmt(&init, &fresh);
        for iv in inner_data.iter().rev() {
            let v = fresh[iv.var()].as_var().expect("fresh variable");
            let ext = self.b.dom[iv.var()].extent().clone();
            let kind = st
                .for_kind
                .get(iv.var())
                .copied()
                .unwrap_or(ForKind::Serial);
            stmt = Stmt::for_loop(&v, PrimExpr::const_int(ext.dtype(), 0), ext, kind, stmt);
        }
        stmt
    }

    fn make_for(&self, s: usize, iv: &IterVar, body: Stmt) -> Stmt {
        let st = &self.inner.stages[s];
        let ext = self.b.dom[iv.var()].extent().clone();
        let kind = st
            .for_kind
            .get(iv.var())
            .copied()
            .unwrap_or(ForKind::Serial);
        let zero = PrimExpr::const_int(ext.dtype(), 0);
        // As TVM, a loop of one iteration is no loop: its variable is 0.
        let mut stmt = if let Some(thread) = st.bind.get(iv.var()) {
            self.launch_thread(iv, thread, &ext, body)
        } else if ext.is_const_int(1) && kind != ForKind::Vectorized {
            let map = HashMap::from([(iv.var().clone(), zero)]);
            substitute_stmt(&body, &map)
        } else {
            Stmt::for_loop(iv.var(), zero, ext, kind, body)
        };
        // Prefetches around the loop itself (InjectPrefetch reads the loop under them).
        if let Some(list) = st.prefetches.get(iv.var()) {
            for (t, offset) in list {
                let buf = self
                    .op_stage
                    .get(&t.op().key())
                    .and_then(|&ts| self.bufs.get(&(ts, t.value_index())));
                if let (Some((buf, _)), StmtKind::For(_)) = (buf, stmt.kind()) {
                    stmt = Stmt::attr(
                        buf.clone(),
                        kiln_tir::transform::inject_prefetch::PREFETCH_SCOPE,
                        *offset,
                        stmt,
                    );
                }
            }
        }
        if let Some(pragmas) = st.pragmas.get(iv.var()) {
            for (key, value) in pragmas.iter().rev() {
                stmt = Stmt::attr(iv.var().clone(), &format!("pragma_{key}"), value, stmt);
            }
        }
        stmt
    }

    /// Loop `iv` bound to `thread`: `body` under `thread_extent = ext` of the tag's shared
    /// variable, which replaces the loop variable (TVM's `MakeLoopNest` for bound axes).
    fn launch_thread(&self, iv: &IterVar, thread: &IterVar, ext: &PrimExpr, body: Stmt) -> Stmt {
        let tv = self
            .thread_vars
            .borrow_mut()
            .entry(thread.thread_tag().to_string())
            .or_insert_with(|| {
                if thread.var().name() == thread.thread_tag() {
                    thread.var().clone()
                } else {
                    Var::new(thread.thread_tag(), kiln_tir::DataType::int(32))
                }
            })
            .clone();
        let value = if tv.dtype() == iv.var().dtype() {
            tv.to_expr()
        } else {
            tv.to_expr().cast(iv.var().dtype())
        };
        let body = substitute_stmt(&body, &HashMap::from([(iv.var().clone(), value)]));
        let ext = if ext.dtype() == tv.dtype() {
            ext.clone()
        } else {
            ext.cast(tv.dtype())
        };
        Stmt::attr(tv, THREAD_EXTENT, ext, body)
    }

    /// `body` preceded by the nests of the stages attached at loop `var` (with their
    /// allocations around both).
    fn with_attached(&self, var: &Var, mut body: Stmt) -> Result<Stmt> {
        if let Some(children) = self.attached.get(var) {
            for &ch in children.iter().rev() {
                if self.inner.stages[ch].is_placeholder() {
                    continue;
                }
                let nest = self.make_stage(ch)?;
                body = self.allocate(ch, Stmt::seq(vec![nest, body]));
            }
        }
        Ok(body)
    }
}
