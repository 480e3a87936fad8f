//! Structural equality and hashing of IR, as TVM's `StructuralEqual` / `StructuralHash`.
//!
//! Two trees are equal when they have the same shape, types and constants, with variables
//! matched by *position of definition* rather than by identity: loop variables, let variables,
//! allocated buffer variables, function parameters, buffers (and their data variables), and
//! variables that an `AttrStmt` is about (thread axes) are
//! definitions, and the first time one is met it is paired with its counterpart. So two
//! functions that differ only in variable names (or are two copies of one another, e.g. after a
//! JSON round trip) are equal. A variable used without a definition (a *free* variable) must be
//! the same object on both sides, unless `map_free_vars` is set, in which case free variables are
//! paired on first use too. Names (hints) never matter.
//!
//! The hash agrees with the equality: equal trees hash alike (definitions are numbered in
//! traversal order).

use crate::buffer::Buffer;
use crate::expr::{ExprKind, PrimExpr, Var};
use crate::function::{IRModule, PrimFunc, Range};
use crate::node::ptr_key;
use crate::stmt::{Stmt, StmtKind};
use kiln_ffi::{Any, AnyView, Array, Map, TryFromAny};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// A type that structural equality and hashing apply to.
pub trait Structural {
    /// Compares with `other` under the pairing state of `eq`.
    fn struct_eq(&self, other: &Self, eq: &mut StructEq) -> bool;
    /// Feeds the structure into `h`.
    fn struct_hash(&self, h: &mut StructHash);
}

/// True when `a` and `b` are structurally equal (free variables must be identical).
pub fn structural_equal<T: Structural>(a: &T, b: &T) -> bool {
    structural_equal_with(a, b, false)
}

/// Structural equality; with `map_free_vars`, free variables are paired on first use.
pub fn structural_equal_with<T: Structural>(a: &T, b: &T, map_free_vars: bool) -> bool {
    a.struct_eq(b, &mut StructEq::new(map_free_vars))
}

/// Panics with both texts when `a` and `b` are not structurally equal (for tests of passes).
#[track_caller]
pub fn assert_structural_equal<T: Structural + std::fmt::Display>(a: &T, b: &T) {
    if !structural_equal(a, b) {
        panic!("IR differs structurally.\n--- left:\n{a}\n--- right:\n{b}");
    }
}

/// The structural hash (free variables hash by identity).
pub fn structural_hash<T: Structural>(a: &T) -> u64 {
    structural_hash_with(a, false)
}

/// The structural hash; with `map_free_vars`, free variables hash by order of first use.
pub fn structural_hash_with<T: Structural>(a: &T, map_free_vars: bool) -> u64 {
    let mut h = StructHash {
        map_free: map_free_vars,
        defining: false,
        ids: HashMap::new(),
        next: 0,
        state: DefaultHasher::new(),
    };
    a.struct_hash(&mut h);
    h.state.finish()
}

/// The pairing state of one structural comparison.
pub struct StructEq {
    map_free: bool,
    defining: bool,
    identity_only: bool,
    l2r: HashMap<usize, usize>,
    r2l: HashMap<usize, usize>,
}

impl StructEq {
    fn new(map_free: bool) -> Self {
        StructEq {
            map_free,
            defining: false,
            identity_only: true,
            l2r: HashMap::new(),
            r2l: HashMap::new(),
        }
    }

    fn bind(&mut self, ka: usize, kb: usize) {
        self.identity_only &= ka == kb;
        self.l2r.insert(ka, kb);
        self.r2l.insert(kb, ka);
    }

    // Identical subtrees are equal as long as no variable has been paired with another one.
    fn fast(&self, same: bool) -> bool {
        same && self.identity_only && !self.map_free
    }

    fn defining<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let old = std::mem::replace(&mut self.defining, true);
        let r = f(self);
        self.defining = old;
        r
    }

    /// Compares two variables (a use, or a definition in definition mode).
    pub fn var(&mut self, a: &Var, b: &Var) -> bool {
        let (ka, kb) = (ptr_key(a.object()), ptr_key(b.object()));
        if let Some(&m) = self.l2r.get(&ka) {
            return m == kb;
        }
        if self.r2l.contains_key(&kb) {
            return false;
        }
        if self.defining || self.map_free {
            if a.dtype() != b.dtype() || a.is_size_var() != b.is_size_var() {
                return false;
            }
            self.bind(ka, kb);
            true
        } else {
            ka == kb
        }
    }

    /// Pairs two variables at a definition.
    pub fn def_var(&mut self, a: &Var, b: &Var) -> bool {
        self.defining(|s| s.var(a, b))
    }

    /// Compares two buffers. At a definition (buffer map, `DeclBuffer`) or with `map_free_vars`,
    /// unpaired buffers are compared by structure and paired. At a use, an unpaired buffer is a
    /// free one: equal only to itself, or to a buffer over a data variable already paired with
    /// its own (a buffer over an allocation, declared implicitly).
    pub fn buffer(&mut self, a: &Buffer, b: &Buffer) -> bool {
        let (ka, kb) = (ptr_key(a.object()), ptr_key(b.object()));
        if let Some(&m) = self.l2r.get(&ka) {
            return m == kb;
        }
        if self.r2l.contains_key(&kb) {
            return false;
        }
        let (x, y) = (a.object(), b.object());
        if !self.defining && !self.map_free {
            let (da, db) = (ptr_key(x.data.object()), ptr_key(y.data.object()));
            let data_paired = self.l2r.get(&da) == Some(&db);
            if ka != kb && !data_paired {
                return false;
            }
        }
        let ok = x.dtype == y.dtype
            && x.scope == y.scope
            && x.data_alignment == y.data_alignment
            && x.offset_factor == y.offset_factor
            && self.def_var(&x.data, &y.data)
            && self.exprs(&x.shape, &y.shape)
            && self.exprs(&x.strides, &y.strides)
            && self.expr(&x.elem_offset, &y.elem_offset);
        if ok {
            self.bind(ka, kb);
        }
        ok
    }

    /// Compares two expression lists.
    pub fn exprs(&mut self, a: &[PrimExpr], b: &[PrimExpr]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| self.expr(x, y))
    }

    /// Compares two expressions.
    pub fn expr(&mut self, a: &PrimExpr, b: &PrimExpr) -> bool {
        if self.fast(a.same_as(b)) {
            return true;
        }
        if a.dtype() != b.dtype() {
            return false;
        }
        use ExprKind as K;
        match (a.kind(), b.kind()) {
            (K::IntImm(x), K::IntImm(y)) => x == y,
            (K::FloatImm(x), K::FloatImm(y)) => x.to_bits() == y.to_bits(),
            (K::StringImm(x), K::StringImm(y)) => x == y,
            (K::Var(x), K::Var(y)) => self.var(&x, &y),
            (K::Binary(o1, a1, b1), K::Binary(o2, a2, b2)) => {
                o1 == o2 && self.expr(a1, a2) && self.expr(b1, b2)
            }
            (K::Not(x), K::Not(y)) | (K::Cast(x), K::Cast(y)) => self.expr(x, y),
            (
                K::Select {
                    cond: c1,
                    t: t1,
                    f: f1,
                },
                K::Select {
                    cond: c2,
                    t: t2,
                    f: f2,
                },
            ) => self.expr(c1, c2) && self.expr(t1, t2) && self.expr(f1, f2),
            (
                K::Let {
                    var: v1,
                    value: x1,
                    body: b1,
                },
                K::Let {
                    var: v2,
                    value: x2,
                    body: b2,
                },
            ) => self.expr(x1, x2) && self.def_var(v1, v2) && self.expr(b1, b2),
            (
                K::BufferLoad {
                    buffer: p,
                    indices: i,
                },
                K::BufferLoad {
                    buffer: q,
                    indices: j,
                },
            ) => self.buffer(p, q) && self.exprs(i, j),
            (
                K::Ramp {
                    base: b1,
                    stride: s1,
                    lanes: l1,
                },
                K::Ramp {
                    base: b2,
                    stride: s2,
                    lanes: l2,
                },
            ) => l1 == l2 && self.expr(b1, b2) && self.expr(s1, s2),
            (
                K::Broadcast {
                    value: x,
                    lanes: l1,
                },
                K::Broadcast {
                    value: y,
                    lanes: l2,
                },
            ) => l1 == l2 && self.expr(x, y),
            (K::Call { op: o1, args: a1 }, K::Call { op: o2, args: a2 }) => {
                o1 == o2 && self.exprs(a1, a2)
            }
            _ => false,
        }
    }

    /// Compares two statements.
    pub fn stmt(&mut self, a: &Stmt, b: &Stmt) -> bool {
        if self.fast(a.same_as(b)) {
            return true;
        }
        use StmtKind as K;
        match (a.kind(), b.kind()) {
            (K::For(x), K::For(y)) => {
                x.kind == y.kind
                    && self.expr(&x.min, &y.min)
                    && self.expr(&x.extent, &y.extent)
                    && self.def_var(&x.loop_var, &y.loop_var)
                    && self.map(&x.annotations, &y.annotations)
                    && self.stmt(&x.body, &y.body)
            }
            (K::BufferStore(x), K::BufferStore(y)) => {
                self.buffer(&x.buffer, &y.buffer)
                    && self.expr(&x.value, &y.value)
                    && self.exprs(&x.indices, &y.indices)
            }
            (K::Allocate(x), K::Allocate(y)) => {
                x.dtype == y.dtype
                    && x.scope == y.scope
                    && self.exprs(&x.extents, &y.extents)
                    && self.def_var(&x.buffer_var, &y.buffer_var)
                    && self.expr(&x.condition, &y.condition)
                    && self.map(&x.annotations, &y.annotations)
                    && self.stmt(&x.body, &y.body)
            }
            (K::DeclBuffer(x), K::DeclBuffer(y)) => {
                self.defining(|s| s.buffer(&x.buffer, &y.buffer)) && self.stmt(&x.body, &y.body)
            }
            (K::IfThenElse(x), K::IfThenElse(y)) => {
                self.expr(&x.condition, &y.condition)
                    && self.stmt(&x.then_case, &y.then_case)
                    && match (&x.else_case, &y.else_case) {
                        (None, None) => true,
                        (Some(p), Some(q)) => self.stmt(p, q),
                        _ => false,
                    }
            }
            (K::LetStmt(x), K::LetStmt(y)) => {
                self.expr(&x.value, &y.value)
                    && self.def_var(&x.var, &y.var)
                    && self.stmt(&x.body, &y.body)
            }
            (K::Seq(x), K::Seq(y)) => {
                x.seq.len() == y.seq.len()
                    && x.seq.iter().zip(y.seq.iter()).all(|(p, q)| self.stmt(p, q))
            }
            (K::AttrStmt(x), K::AttrStmt(y)) => {
                x.attr_key == y.attr_key
                    && match (x.node.try_as::<Var>(), y.node.try_as::<Var>()) {
                        // A variable an attribute is about (a thread axis) is defined there.
                        (Ok(p), Ok(q)) => self.def_var(&p, &q),
                        _ => self.any(&x.node.view(), &y.node.view()),
                    }
                    && self.expr(&x.value, &y.value)
                    && self.stmt(&x.body, &y.body)
            }
            (K::Assert(x), K::Assert(y)) => {
                self.expr(&x.condition, &y.condition)
                    && self.expr(&x.message, &y.message)
                    && self.stmt(&x.body, &y.body)
            }
            (K::Evaluate(x), K::Evaluate(y)) => self.expr(&x.value, &y.value),
            _ => false,
        }
    }

    /// Compares two functions: parameters and buffer map are definitions.
    pub fn func(&mut self, a: &PrimFunc, b: &PrimFunc) -> bool {
        let (pa, pb) = (a.params(), b.params());
        let (ma, mb) = (a.buffer_map().entries(), b.buffer_map().entries());
        a.ret_type() == b.ret_type()
            && pa.len() == pb.len()
            && ma.len() == mb.len()
            && self.defining(|s| {
                pa.iter().zip(pb).all(|(x, y)| s.var(x, y))
                    && ma
                        .iter()
                        .zip(mb)
                        .all(|((v1, b1), (v2, b2))| s.var(v1, v2) && s.buffer(b1, b2))
            })
            && self.map(a.attrs(), b.attrs())
            && self.stmt(a.body(), b.body())
    }

    /// Compares two modules: same function names, functions equal.
    pub fn module(&mut self, a: &IRModule, b: &IRModule) -> bool {
        a.functions().len() == b.functions().len()
            && a.functions().iter().all(|(name, f)| {
                b.lookup(name)
                    .is_some_and(|g| StructEq::new(self.map_free).func(f, g))
            })
            && self.map(a.attrs(), b.attrs())
    }

    /// Compares two maps: by key when every key is a string, else in order.
    pub fn map(&mut self, a: &Map, b: &Map) -> bool {
        if a.len() != b.len() {
            return false;
        }
        match (string_keyed(a), string_keyed(b)) {
            (Some(x), Some(y)) => x
                .iter()
                .zip(&y)
                .all(|((k1, v1), (k2, v2))| k1 == k2 && self.any(v1, v2)),
            (None, None) => a
                .iter()
                .zip(b.iter())
                .all(|((k1, v1), (k2, v2))| self.any(&k1, &k2) && self.any(&v1, &v2)),
            _ => false,
        }
    }

    /// Compares two values of any kind (IR nodes structurally, containers item by item, other
    /// values as `kiln-ffi` compares them).
    pub fn any(&mut self, a: &AnyView<'_>, b: &AnyView<'_>) -> bool {
        match (PrimExpr::from_any_strict(a), PrimExpr::from_any_strict(b)) {
            (Some(x), Some(y)) => return self.expr(&x, &y),
            (None, None) => {}
            _ => return false,
        }
        macro_rules! typed {
            ($t:ty, $m:ident) => {
                match (<$t>::try_from_view(a), <$t>::try_from_view(b)) {
                    (Some(x), Some(y)) => return self.$m(&x, &y),
                    (None, None) => {}
                    _ => return false,
                }
            };
        }
        typed!(Stmt, stmt);
        typed!(Buffer, buffer);
        typed!(PrimFunc, func);
        typed!(IRModule, module);
        if let (Some(x), Some(y)) = (Range::try_from_view(a), Range::try_from_view(b)) {
            return self.expr(x.min(), y.min()) && self.expr(x.extent(), y.extent());
        }
        if let (Some(x), Some(y)) = (Array::try_from_view(a), Array::try_from_view(b)) {
            return x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| self.any(&p, &q));
        }
        if let (Some(x), Some(y)) = (Map::try_from_view(a), Map::try_from_view(b)) {
            return self.map(&x, &y);
        }
        kiln_ffi::reflection::structural_equal(a, b)
    }
}

/// The entries sorted by key when every key is a string.
fn string_keyed(m: &Map) -> Option<Vec<(String, AnyView<'_>)>> {
    let mut v = m
        .iter()
        .map(|(k, x)| Some((String::try_from_view(&k)?, x)))
        .collect::<Option<Vec<_>>>()?;
    v.sort_by(|a, b| a.0.cmp(&b.0));
    Some(v)
}

/// The state of one structural hash.
pub struct StructHash {
    map_free: bool,
    defining: bool,
    ids: HashMap<usize, u64>,
    next: u64,
    state: DefaultHasher,
}

impl StructHash {
    fn put(&mut self, v: impl Hash) {
        v.hash(&mut self.state);
    }

    fn defining<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let old = std::mem::replace(&mut self.defining, true);
        let r = f(self);
        self.defining = old;
        r
    }

    fn id_of(&mut self, key: usize) -> u64 {
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.next;
        self.next += 1;
        self.ids.insert(key, id);
        id
    }

    /// Hashes a variable use (or definition, in definition mode).
    pub fn var(&mut self, v: &Var) {
        let key = ptr_key(v.object());
        self.put((v.dtype(), v.is_size_var()));
        if self.ids.contains_key(&key) || self.defining || self.map_free {
            let id = self.id_of(key);
            self.put((1u8, id));
        } else {
            self.put((2u8, key));
        }
    }

    /// Hashes a variable definition.
    pub fn def_var(&mut self, v: &Var) {
        self.defining(|s| s.var(v))
    }

    /// Hashes a buffer (its structure on first meeting, its number afterwards).
    pub fn buffer(&mut self, b: &Buffer) {
        let key = ptr_key(b.object());
        if let Some(&id) = self.ids.get(&key) {
            self.put((3u8, id));
            return;
        }
        let id = self.id_of(key);
        self.put((4u8, id));
        let x = b.object();
        self.put((x.dtype, x.scope.as_str(), x.data_alignment, x.offset_factor));
        self.def_var(&x.data);
        self.exprs(&x.shape);
        self.exprs(&x.strides);
        self.expr(&x.elem_offset);
    }

    /// Hashes an expression list.
    pub fn exprs(&mut self, l: &[PrimExpr]) {
        self.put(l.len());
        l.iter().for_each(|e| self.expr(e));
    }

    /// Hashes an expression.
    pub fn expr(&mut self, e: &PrimExpr) {
        self.put(e.dtype());
        use ExprKind as K;
        match e.kind() {
            K::IntImm(v) => self.put((10u8, v)),
            K::FloatImm(v) => self.put((11u8, v.to_bits())),
            K::StringImm(s) => self.put((12u8, s)),
            K::Var(v) => self.var(&v),
            K::Binary(op, a, b) => {
                self.put((13u8, op));
                self.expr(a);
                self.expr(b);
            }
            K::Not(a) => {
                self.put(14u8);
                self.expr(a);
            }
            K::Cast(a) => {
                self.put(15u8);
                self.expr(a);
            }
            K::Select { cond, t, f } => {
                self.put(16u8);
                self.expr(cond);
                self.expr(t);
                self.expr(f);
            }
            K::Let { var, value, body } => {
                self.put(17u8);
                self.expr(value);
                self.def_var(var);
                self.expr(body);
            }
            K::BufferLoad { buffer, indices } => {
                self.put(18u8);
                self.buffer(buffer);
                self.exprs(indices);
            }
            K::Ramp {
                base,
                stride,
                lanes,
            } => {
                self.put((19u8, lanes));
                self.expr(base);
                self.expr(stride);
            }
            K::Broadcast { value, lanes } => {
                self.put((20u8, lanes));
                self.expr(value);
            }
            K::Call { op, args } => {
                self.put((21u8, op));
                self.exprs(args);
            }
        }
    }

    /// Hashes a statement.
    pub fn stmt(&mut self, s: &Stmt) {
        self.put(s.type_key());
        match s.kind() {
            StmtKind::For(x) => {
                self.put(x.kind);
                self.expr(&x.min);
                self.expr(&x.extent);
                self.def_var(&x.loop_var);
                self.map(&x.annotations);
                self.stmt(&x.body);
            }
            StmtKind::BufferStore(x) => {
                self.buffer(&x.buffer);
                self.expr(&x.value);
                self.exprs(&x.indices);
            }
            StmtKind::Allocate(x) => {
                self.put((x.dtype, x.scope.as_str()));
                self.exprs(&x.extents);
                self.def_var(&x.buffer_var);
                self.expr(&x.condition);
                self.map(&x.annotations);
                self.stmt(&x.body);
            }
            StmtKind::DeclBuffer(x) => {
                self.buffer(&x.buffer);
                self.stmt(&x.body);
            }
            StmtKind::IfThenElse(x) => {
                self.expr(&x.condition);
                self.stmt(&x.then_case);
                self.put(x.else_case.is_some());
                if let Some(e) = &x.else_case {
                    self.stmt(e);
                }
            }
            StmtKind::LetStmt(x) => {
                self.expr(&x.value);
                self.def_var(&x.var);
                self.stmt(&x.body);
            }
            StmtKind::Seq(x) => {
                self.put(x.seq.len());
                x.seq.iter().for_each(|s| self.stmt(s));
            }
            StmtKind::AttrStmt(x) => {
                self.put(x.attr_key.as_str());
                match x.node.try_as::<Var>() {
                    Ok(v) => self.def_var(&v),
                    Err(_) => self.any(&x.node.view()),
                }
                self.expr(&x.value);
                self.stmt(&x.body);
            }
            StmtKind::Assert(x) => {
                self.expr(&x.condition);
                self.expr(&x.message);
                self.stmt(&x.body);
            }
            StmtKind::Evaluate(x) => self.expr(&x.value),
        }
    }

    /// Hashes a function.
    pub fn func(&mut self, f: &PrimFunc) {
        self.put(("tir.PrimFunc", f.ret_type(), f.params().len()));
        self.defining(|s| {
            f.params().iter().for_each(|p| s.var(p));
            s.put(f.buffer_map().len());
            for (v, b) in f.buffer_map().iter() {
                s.var(v);
                s.buffer(b);
            }
        });
        self.map(f.attrs());
        self.stmt(f.body());
    }

    /// Hashes a module.
    pub fn module(&mut self, m: &IRModule) {
        self.put(("ir.IRModule", m.functions().len()));
        let mut names: Vec<&String> = m.functions().iter().map(|(n, _)| n).collect();
        names.sort();
        for n in names {
            self.put(n.as_str());
            let sub = structural_hash_with(m.lookup(n).unwrap(), self.map_free);
            self.put(sub);
        }
        self.map(m.attrs());
    }

    /// Hashes a map (string-keyed maps in key order).
    pub fn map(&mut self, m: &Map) {
        self.put(m.len());
        match string_keyed(m) {
            Some(entries) => {
                for (k, v) in entries {
                    self.put(k.as_str());
                    self.any(&v);
                }
            }
            None => {
                for (k, v) in m.iter() {
                    self.any(&k);
                    self.any(&v);
                }
            }
        }
    }

    /// Hashes a value of any kind.
    pub fn any(&mut self, v: &AnyView<'_>) {
        if let Some(e) = PrimExpr::from_any_strict(v) {
            return self.expr(&e);
        }
        if let Some(s) = Stmt::try_from_view(v) {
            return self.stmt(&s);
        }
        if let Some(b) = Buffer::try_from_view(v) {
            return self.buffer(&b);
        }
        if let Some(f) = PrimFunc::try_from_view(v) {
            return self.func(&f);
        }
        if let Some(m) = IRModule::try_from_view(v) {
            return self.module(&m);
        }
        if let Some(r) = Range::try_from_view(v) {
            self.expr(r.min());
            return self.expr(r.extent());
        }
        if let Some(a) = Array::try_from_view(v) {
            self.put(("ffi.Array", a.len()));
            return a.iter().for_each(|x| self.any(&x));
        }
        if let Some(m) = Map::try_from_view(v) {
            return self.map(&m);
        }
        if let Some(s) = v.str_bytes() {
            return self.put(s);
        }
        // Plain values hash by their bits; other objects by their type.
        let raw = v.raw();
        self.put(raw.type_index);
        if raw.type_index < kiln_ffi::abi::type_index::STATIC_OBJECT_BEGIN {
            // SAFETY: plain values keep their payload in these 8 bytes.
            self.put(unsafe { raw.value.v_uint64 });
        }
    }
}

macro_rules! structural_impl {
    ($($t:ty => $eq:ident, $hash:ident;)*) => {$(
        impl Structural for $t {
            fn struct_eq(&self, other: &Self, eq: &mut StructEq) -> bool {
                eq.$eq(self, other)
            }
            fn struct_hash(&self, h: &mut StructHash) {
                h.$hash(self)
            }
        }
    )*};
}

structural_impl! {
    PrimExpr => expr, expr;
    Stmt => stmt, stmt;
    Buffer => buffer, buffer;
    PrimFunc => func, func;
    IRModule => module, module;
}

impl Structural for Any {
    fn struct_eq(&self, other: &Self, eq: &mut StructEq) -> bool {
        eq.any(&self.view(), &other.view())
    }
    fn struct_hash(&self, h: &mut StructHash) {
        h.any(&self.view())
    }
}

impl Structural for Var {
    fn struct_eq(&self, other: &Self, eq: &mut StructEq) -> bool {
        eq.var(self, other)
    }
    fn struct_hash(&self, h: &mut StructHash) {
        h.var(self)
    }
}
