//! Expressions (`PrimExpr`): constants, variables, arithmetic, comparisons, logic, casts,
//! selects, lets, buffer loads, vector ramps and broadcasts, and calls.
//!
//! Every node is a reflected `kiln-ffi` object whose parent is `tir.PrimExpr` (the `dtype`
//! field). [`PrimExpr`] is the handle Rust code holds; [`PrimExpr::kind`] tells what it is.
//! The checked constructors (`PrimExpr::try_*`) validate dtypes and return `TypeError`s; the
//! operators and free functions in [`ops`](self) build through them and panic on misuse, like
//! TVM's `ICHECK`s, with the same message.

mod kind;
mod nodes;
mod ops;

pub use kind::ExprKind;
pub(crate) use kind::{expr_tag, ExprTag};
pub use nodes::*;
pub use ops::*;

use crate::buffer::Buffer;
use crate::dtype::DataTypeExt;
use crate::node::{payload, ptr_key, upcast_ref, NodeList};
use kiln_ffi::{AnyView, DataType, Error, Object, ObjectRef, ObjectType, Result, TryFromAny};
use std::fmt;
use std::hash::{Hash, Hasher};

/// The parent of every expression node (`tir.PrimExpr`): its data type.
#[derive(Object)]
#[object(type_key = "tir.PrimExpr")]
#[repr(C)]
pub struct PrimExprObj {
    /// The type of the value the expression computes.
    pub dtype: DataType,
}

/// A TIR expression. Cheap to clone (a reference count). Printing shows TVMScript-like text.
#[derive(Clone, ObjectRef)]
#[object_ref(methods, debug_as_display, try_from_view = PrimExpr::from_view)]
pub struct PrimExpr(ObjectRef<PrimExprObj>);

/// A variable. Equality and hashing are by identity: two variables with one name are different.
#[derive(Clone, ObjectRef)]
#[object_ref(methods)]
pub struct Var(ObjectRef<VarObj>);

fn short(e: &PrimExpr) -> String {
    let s = e.to_string();
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(57).collect::<String>())
    } else {
        s
    }
}

impl PrimExpr {
    /// Wraps a node built field by field (no checks): for passes that rebuild nodes.
    pub fn from_node<T: ExprNode>(node: T) -> PrimExpr {
        // SAFETY: ExprNode types start with PrimExprObj.
        PrimExpr(unsafe { upcast_ref(ObjectRef::new(node)) })
    }

    /// The handle for an object, if it is a concrete expression node.
    pub fn from_object(obj: ObjectRef<kiln_ffi::Object>) -> Option<PrimExpr> {
        expr_tag(obj.type_index())?;
        // SAFETY: every concrete expression node starts with PrimExprObj.
        Some(PrimExpr(unsafe { upcast_ref(obj) }))
    }

    /// The expression in a value, only if the value is an expression object (no literal
    /// conversion, unlike `TryFromAny`).
    pub fn from_any_strict(v: &AnyView<'_>) -> Option<PrimExpr> {
        expr_tag(v.type_index())?;
        ObjectRef::<kiln_ffi::Object>::try_from_view(v).and_then(PrimExpr::from_object)
    }

    /// The value type.
    #[inline]
    pub fn dtype(&self) -> DataType {
        self.0.dtype
    }

    /// The value of an integer (or bool) constant.
    pub fn as_int(&self) -> Option<i64> {
        match self.tag() {
            // SAFETY: the tag says IntImm.
            ExprTag::IntImm => Some(unsafe { payload::<IntImmObj, _>(&self.0) }.value),
            _ => None,
        }
    }

    /// The value of a floating-point constant.
    pub fn as_float(&self) -> Option<f64> {
        match self.tag() {
            // SAFETY: the tag says FloatImm.
            ExprTag::FloatImm => Some(unsafe { payload::<FloatImmObj, _>(&self.0) }.value),
            _ => None,
        }
    }

    /// True for an integer constant equal to `v`.
    pub fn is_const_int(&self, v: i64) -> bool {
        self.as_int() == Some(v)
    }

    /// True for an integer or float constant.
    pub fn is_const(&self) -> bool {
        matches!(self.tag(), ExprTag::IntImm | ExprTag::FloatImm)
    }

    /// The variable, when this expression is one.
    pub fn as_var(&self) -> Option<Var> {
        match self.tag() {
            // SAFETY: the tag says Var (or SizeVar, which starts with VarObj).
            ExprTag::Var => Some(unsafe { Var::from_expr_unchecked(self) }),
            _ => None,
        }
    }

    // ---- constants ------------------------------------------------------------------------

    /// An integer or bool constant; `TypeError` for other dtypes or vectors, `ValueError` when
    /// `value` does not fit.
    pub fn int_imm(dtype: DataType, value: i64) -> Result<PrimExpr> {
        if !(dtype.is_integer() || dtype.is_bool()) || dtype.is_vector() {
            return Err(Error::type_error(format!(
                "tir.IntImm needs a scalar integer or bool dtype, got {dtype}"
            )));
        }
        if !dtype.fits_int(value) {
            return Err(Error::value_error(format!(
                "tir.IntImm: {value} does not fit in {dtype}"
            )));
        }
        Ok(PrimExpr::from_node(IntImmObj {
            parent: PrimExprObj { dtype },
            value,
        }))
    }

    /// A floating-point constant (rounded to `float32`/`float16` when the dtype is narrower).
    pub fn float_imm(dtype: DataType, value: f64) -> Result<PrimExpr> {
        if !dtype.is_floating() || dtype.is_vector() {
            return Err(Error::type_error(format!(
                "tir.FloatImm needs a scalar float dtype, got {dtype}"
            )));
        }
        let value = if dtype.bits() == 32 {
            value as f32 as f64
        } else {
            value
        };
        Ok(PrimExpr::from_node(FloatImmObj {
            parent: PrimExprObj { dtype },
            value,
        }))
    }

    /// An `int32` constant (wrapped to 32 bits).
    pub fn i32(v: i64) -> PrimExpr {
        PrimExpr::const_int(DataType::int(32), v)
    }

    /// An `int64` constant.
    pub fn i64(v: i64) -> PrimExpr {
        PrimExpr::const_int(DataType::int(64), v)
    }

    /// A `bool` constant.
    pub fn bool(v: bool) -> PrimExpr {
        PrimExpr::const_int(DataType::bool(), v as i64)
    }

    /// A `float32` constant.
    pub fn f32(v: f64) -> PrimExpr {
        PrimExpr::const_float(DataType::float(32), v)
    }

    /// A `float64` constant.
    pub fn f64(v: f64) -> PrimExpr {
        PrimExpr::const_float(DataType::float(64), v)
    }

    /// A string constant (dtype `handle`).
    pub fn string(s: &str) -> PrimExpr {
        PrimExpr::from_node(StringImmObj {
            parent: PrimExprObj {
                dtype: DataType::handle(),
            },
            value: s.into(),
        })
    }

    /// The constant `v` in `dtype`, as TVM's `make_const`: integers are wrapped to the type,
    /// floats get `v as f64`, vector types broadcast the scalar.
    ///
    /// # Panics
    /// For dtypes without constants (handle, void).
    pub fn const_int(dtype: DataType, v: i64) -> PrimExpr {
        let elem = dtype.element_of();
        let scalar = if elem.is_floating() {
            PrimExpr::const_float(elem, v as f64)
        } else if elem.is_integer() || elem.is_bool() {
            PrimExpr::from_node(IntImmObj {
                parent: PrimExprObj { dtype: elem },
                value: elem.wrap_int(v),
            })
        } else {
            panic!("no integer constant of type {dtype}")
        };
        PrimExpr::maybe_broadcast(scalar, dtype.lanes())
    }

    /// The float constant `v` in `dtype` (integers truncate it); vectors broadcast.
    ///
    /// # Panics
    /// For dtypes without constants (handle, void).
    pub fn const_float(dtype: DataType, v: f64) -> PrimExpr {
        let elem = dtype.element_of();
        let scalar = if elem.is_floating() {
            let v = if elem.bits() == 32 {
                v as f32 as f64
            } else {
                v
            };
            PrimExpr::from_node(FloatImmObj {
                parent: PrimExprObj { dtype: elem },
                value: v,
            })
        } else if elem.is_integer() || elem.is_bool() {
            return PrimExpr::const_int(dtype, v as i64);
        } else {
            panic!("no float constant of type {dtype}")
        };
        PrimExpr::maybe_broadcast(scalar, dtype.lanes())
    }

    fn maybe_broadcast(scalar: PrimExpr, lanes: u16) -> PrimExpr {
        if lanes > 1 {
            PrimExpr::broadcast_raw(scalar, lanes as i64)
        } else {
            scalar
        }
    }

    // ---- checked node constructors ------------------------------------------------------

    /// `a op b`, checking dtypes: operands must have one dtype, except that an integer or float
    /// literal adapts to the other operand's type (and lanes). Comparisons give `bool` with the
    /// operands' lanes; `and`/`or` need bools.
    pub fn try_binary(op: BinOp, a: PrimExpr, b: PrimExpr) -> Result<PrimExpr> {
        let (a, b) = match_literal_types(op, a, b)?;
        let t = a.dtype();
        if op.is_logical() {
            if !t.is_bool() {
                return Err(Error::type_error(format!(
                    "{} needs bool operands, got {t} ({})",
                    op.type_key(),
                    short(&a)
                )));
            }
        } else if !t.is_numeric() {
            return Err(Error::type_error(format!(
                "{} needs numeric operands, got {t} ({})",
                op.type_key(),
                short(&a)
            )));
        }
        let dtype = if op.is_comparison() {
            DataType::bool().with_lanes(t.lanes())
        } else {
            t
        };
        Ok(op.make(dtype, a, b))
    }

    /// `a op b` without any check (the caller guarantees matching dtypes).
    pub fn binary_raw(op: BinOp, a: PrimExpr, b: PrimExpr) -> PrimExpr {
        let t = a.dtype();
        let dtype = if op.is_comparison() {
            DataType::bool().with_lanes(t.lanes())
        } else {
            t
        };
        op.make(dtype, a, b)
    }

    /// `not a`; `a` must be bool.
    pub fn try_not(a: PrimExpr) -> Result<PrimExpr> {
        if !a.dtype().is_bool() {
            return Err(Error::type_error(format!(
                "tir.Not needs a bool operand, got {} ({})",
                a.dtype(),
                short(&a)
            )));
        }
        Ok(PrimExpr::not_raw(a))
    }

    /// `not a` without checks.
    pub fn not_raw(a: PrimExpr) -> PrimExpr {
        PrimExpr::from_node(NotObj {
            parent: PrimExprObj { dtype: a.dtype() },
            a,
        })
    }

    /// `value` converted to `dtype` (same lane count required).
    pub fn try_cast(dtype: DataType, value: PrimExpr) -> Result<PrimExpr> {
        if dtype.lanes() != value.dtype().lanes() {
            return Err(Error::type_error(format!(
                "tir.Cast cannot change lanes: {} to {dtype}",
                value.dtype()
            )));
        }
        Ok(PrimExpr::cast_raw(dtype, value))
    }

    /// A cast without checks.
    pub fn cast_raw(dtype: DataType, value: PrimExpr) -> PrimExpr {
        PrimExpr::from_node(CastObj {
            parent: PrimExprObj { dtype },
            value,
        })
    }

    /// `cond ? t : f`: `cond` bool (scalar or with the values' lanes), `t` and `f` of one dtype
    /// (literals adapt).
    pub fn try_select(cond: PrimExpr, t: PrimExpr, f: PrimExpr) -> Result<PrimExpr> {
        if !cond.dtype().is_bool() {
            return Err(Error::type_error(format!(
                "tir.Select needs a bool condition, got {} ({})",
                cond.dtype(),
                short(&cond)
            )));
        }
        let (t, f) = match_literal_types(BinOp::Add, t, f)
            .map_err(|_| Error::type_error("tir.Select needs both values of one dtype"))?;
        if cond.dtype().lanes() != 1 && cond.dtype().lanes() != t.dtype().lanes() {
            return Err(Error::type_error(format!(
                "tir.Select condition {} does not match value lanes {}",
                cond.dtype(),
                t.dtype()
            )));
        }
        Ok(PrimExpr::select_raw(cond, t, f))
    }

    /// A select without checks.
    pub fn select_raw(cond: PrimExpr, t: PrimExpr, f: PrimExpr) -> PrimExpr {
        PrimExpr::from_node(SelectObj {
            parent: PrimExprObj { dtype: t.dtype() },
            condition: cond,
            true_value: t,
            false_value: f,
        })
    }

    /// `let var = value in body`; `value` must have `var`'s dtype.
    pub fn try_let(var: Var, value: PrimExpr, body: PrimExpr) -> Result<PrimExpr> {
        let value = adapt_literal(value, var.dtype())?;
        Ok(PrimExpr::let_raw(var, value, body))
    }

    /// A let without checks.
    pub fn let_raw(var: Var, value: PrimExpr, body: PrimExpr) -> PrimExpr {
        PrimExpr::from_node(LetObj {
            parent: PrimExprObj {
                dtype: body.dtype(),
            },
            var,
            value,
            body,
        })
    }

    /// `buffer[indices]`: one integer index per dimension; a vector last index reads that many
    /// lanes.
    pub fn try_buffer_load(buffer: Buffer, indices: Vec<PrimExpr>) -> Result<PrimExpr> {
        buffer.check_indices("tir.BufferLoad", &indices)?;
        Ok(PrimExpr::buffer_load_raw(buffer, indices))
    }

    /// A load without checks (dtype: the buffer's element type with the last index's lanes).
    pub fn buffer_load_raw(buffer: Buffer, indices: Vec<PrimExpr>) -> PrimExpr {
        let lanes = indices.last().map(|i| i.dtype().lanes()).unwrap_or(1);
        let dtype = buffer
            .dtype()
            .with_lanes(buffer.dtype().lanes() * lanes.max(1));
        PrimExpr::from_node(BufferLoadObj {
            parent: PrimExprObj { dtype },
            buffer,
            indices: NodeList::new(indices),
        })
    }

    /// `[base + k*stride for k in 0..lanes]`: scalar integer base and stride of one dtype.
    pub fn try_ramp(base: PrimExpr, stride: PrimExpr, lanes: i64) -> Result<PrimExpr> {
        if lanes < 1 || lanes > u16::MAX as i64 {
            return Err(Error::value_error(format!(
                "tir.Ramp needs 1..65535 lanes, got {lanes}"
            )));
        }
        let stride = adapt_literal(stride, base.dtype())?;
        if !base.dtype().is_scalar() || base.dtype() != stride.dtype() {
            return Err(Error::type_error(format!(
                "tir.Ramp needs scalar base and stride of one dtype, got {} and {}",
                base.dtype(),
                stride.dtype()
            )));
        }
        Ok(PrimExpr::ramp_raw(base, stride, lanes))
    }

    /// A ramp without checks.
    pub fn ramp_raw(base: PrimExpr, stride: PrimExpr, lanes: i64) -> PrimExpr {
        PrimExpr::from_node(RampObj {
            parent: PrimExprObj {
                dtype: base.dtype().with_lanes(lanes as u16),
            },
            base,
            stride,
            lanes,
        })
    }

    /// `value` in each of `lanes` lanes (`value` scalar).
    pub fn try_broadcast(value: PrimExpr, lanes: i64) -> Result<PrimExpr> {
        if lanes < 1 || lanes > u16::MAX as i64 || !value.dtype().is_scalar() {
            return Err(Error::type_error(format!(
                "tir.Broadcast needs a scalar and 1..65535 lanes, got {} and {lanes}",
                value.dtype()
            )));
        }
        Ok(PrimExpr::broadcast_raw(value, lanes))
    }

    /// A broadcast without checks.
    pub fn broadcast_raw(value: PrimExpr, lanes: i64) -> PrimExpr {
        PrimExpr::from_node(BroadcastObj {
            parent: PrimExprObj {
                dtype: value.dtype().with_lanes(lanes as u16),
            },
            value,
            lanes,
        })
    }

    /// A call of operator `op` returning `dtype` (no checks: intrinsics are checked by their
    /// builders in [`crate::op`]).
    pub fn call(dtype: DataType, op: &str, args: Vec<PrimExpr>) -> PrimExpr {
        PrimExpr::from_node(CallObj {
            parent: PrimExprObj { dtype },
            op: op.into(),
            args: NodeList::new(args),
        })
    }
}

/// Converts a literal (`IntImm` / `FloatImm`, or a broadcast of one) to `dtype`, or fails.
fn convert_literal(lit: &PrimExpr, dtype: DataType) -> Option<PrimExpr> {
    if let ExprKind::Broadcast { value, .. } = lit.kind() {
        return convert_literal(value, dtype);
    }
    let elem = dtype.element_of();
    let scalar = match (lit.as_int(), lit.as_float()) {
        (Some(v), _) if elem.is_integer() && elem.fits_int(v) => PrimExpr::const_int(elem, v),
        (Some(v), _) if elem.is_bool() && (v == 0 || v == 1) => PrimExpr::const_int(elem, v),
        (Some(v), _) if elem.is_floating() => PrimExpr::const_float(elem, v as f64),
        (_, Some(f)) if elem.is_floating() => PrimExpr::const_float(elem, f),
        _ => return None,
    };
    Some(PrimExpr::maybe_broadcast(scalar, dtype.lanes()))
}

fn is_literal(e: &PrimExpr) -> bool {
    match e.kind() {
        ExprKind::IntImm(_) | ExprKind::FloatImm(_) => true,
        ExprKind::Broadcast { value, .. } => is_literal(value),
        _ => false,
    }
}

/// Makes a literal operand take `dtype`, or fails with a TypeError naming both types.
pub(crate) fn adapt_literal(e: PrimExpr, dtype: DataType) -> Result<PrimExpr> {
    if e.dtype() == dtype {
        return Ok(e);
    }
    if is_literal(&e) {
        if let Some(c) = convert_literal(&e, dtype) {
            return Ok(c);
        }
    }
    Err(Error::type_error(format!(
        "expected an expression of type {dtype}, got {} ({})",
        e.dtype(),
        short(&e)
    )))
}

fn match_literal_types(op: BinOp, a: PrimExpr, b: PrimExpr) -> Result<(PrimExpr, PrimExpr)> {
    if a.dtype() == b.dtype() {
        return Ok((a, b));
    }
    let (la, lb) = (is_literal(&a), is_literal(&b));
    if lb && !la {
        if let Some(b2) = convert_literal(&b, a.dtype()) {
            return Ok((a, b2));
        }
    } else if la && !lb {
        if let Some(a2) = convert_literal(&a, b.dtype()) {
            return Ok((a2, b));
        }
    }
    Err(Error::type_error(format!(
        "{} needs operands of one dtype, got {} ({}) and {} ({})",
        op.type_key(),
        a.dtype(),
        short(&a),
        b.dtype(),
        short(&b)
    )))
}

impl Var {
    /// A new variable.
    pub fn new(name: &str, dtype: DataType) -> Var {
        Var(ObjectRef::new(VarObj {
            parent: PrimExprObj { dtype },
            name_hint: name.into(),
        }))
    }

    /// A new `int32` variable.
    pub fn int32(name: &str) -> Var {
        Var::new(name, DataType::int(32))
    }

    /// A new handle (pointer) variable.
    pub fn handle(name: &str) -> Var {
        Var::new(name, DataType::handle())
    }

    /// A new variable known to be non-negative (`tir.SizeVar`), for symbolic dimensions.
    pub fn size_var(name: &str, dtype: DataType) -> Var {
        let obj = ObjectRef::new(SizeVarObj {
            parent: VarObj {
                parent: PrimExprObj { dtype },
                name_hint: name.into(),
            },
        });
        // SAFETY: SizeVarObj starts with VarObj.
        Var(unsafe { upcast_ref(obj) })
    }

    /// The variable an expression is.
    ///
    /// # Safety
    /// `e` must be a `tir.Var` or `tir.SizeVar`.
    pub(crate) unsafe fn from_expr_unchecked(e: &PrimExpr) -> Var {
        // SAFETY: the caller guarantees `e` is a Var or SizeVar, whose payloads start with VarObj;
        // from_borrowed takes a new reference, so `e` keeps its own.
        Var(unsafe { ObjectRef::from_borrowed(e.object().as_ptr()) })
    }

    /// The printing name.
    pub fn name(&self) -> &str {
        &self.0.name_hint
    }

    /// The type.
    pub fn dtype(&self) -> DataType {
        self.0.parent.dtype
    }

    /// True for a `tir.SizeVar`.
    pub fn is_size_var(&self) -> bool {
        self.0.type_index() == SizeVarObj::type_index()
    }

    /// The variable as an expression.
    pub fn to_expr(&self) -> PrimExpr {
        PrimExpr::from(self.clone())
    }

    /// A new variable with the same dtype and kind and another name (or the same name).
    pub fn copy_with_name(&self, name: &str) -> Var {
        if self.is_size_var() {
            Var::size_var(name, self.dtype())
        } else {
            Var::new(name, self.dtype())
        }
    }
}

impl From<Var> for PrimExpr {
    fn from(v: Var) -> PrimExpr {
        // SAFETY: VarObj starts with PrimExprObj.
        PrimExpr(unsafe { upcast_ref(v.0) })
    }
}

impl From<&Var> for PrimExpr {
    fn from(v: &Var) -> PrimExpr {
        PrimExpr::from(v.clone())
    }
}

impl From<&PrimExpr> for PrimExpr {
    fn from(e: &PrimExpr) -> PrimExpr {
        e.clone()
    }
}

impl PartialEq for Var {
    fn eq(&self, other: &Var) -> bool {
        self.0.same_as(&other.0)
    }
}
impl Eq for Var {}
impl Hash for Var {
    fn hash<H: Hasher>(&self, state: &mut H) {
        ptr_key(&self.0).hash(state)
    }
}

impl PrimExpr {
    /// The `TryFromAny` downcast: expression objects, and (as TVM's conversion does)
    /// Python-style literals: `int` becomes an `int32` constant (`int64` when it does not fit),
    /// `bool` a bool constant, `float` a `float32` constant.
    fn from_view(v: &AnyView<'_>) -> Option<PrimExpr> {
        use kiln_ffi::abi::type_index as ti;
        match v.type_index() {
            ti::INT => {
                let x = i64::try_from_view(v)?;
                let t = if DataType::int(32).fits_int(x) {
                    DataType::int(32)
                } else {
                    DataType::int(64)
                };
                Some(PrimExpr::const_int(t, x))
            }
            ti::BOOL => Some(PrimExpr::bool(bool::try_from_view(v)?)),
            ti::FLOAT => Some(PrimExpr::f32(f64::try_from_view(v)?)),
            _ => PrimExpr::from_any_strict(v),
        }
    }
}

impl fmt::Display for PrimExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::printer::expr_to_text(self))
    }
}

impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name(), self.dtype())
    }
}
