//! The tensor-expression nodes: [`IterVar`] (`te.IterVar`), [`Operation`] (`te.Operation`, with
//! `te.PlaceholderOp` and `te.ComputeOp`) and [`Tensor`] (`te.Tensor`).
//!
//! A [`Tensor`] is a `tir.Buffer` subtype: its object starts with the buffer fields (name,
//! dtype, shape, a data variable that nothing binds) followed by the producing operation and
//! the output index. Reading a tensor ([`Tensor::at`]) is therefore a plain `tir.BufferLoad` of
//! the tensor, which every TIR visitor, mutator, printer and serializer already understands;
//! lowering replaces those loads by loads of real buffers. This plays the role of TVM's
//! `ProducerLoad`.

use crate::extern_op::ExternOpObj;
use kiln_ffi::{Any, DataType, Map, Object, ObjectRef, ObjectType};
use kiln_tir::buffer::{BufferObj, DEFAULT_ALIGNMENT};
use kiln_tir::node::{IrString, NodeList};
use kiln_tir::visitor::post_order_visit_expr;
use kiln_tir::{Buffer, ExprKind, PrimExpr, Range, Var};
use std::fmt;
use std::hash::{Hash, Hasher};

/// The kinds of iteration variables (TVM's `IterVarType` numbers).
pub mod iter_type {
    /// A data-parallel axis.
    pub const DATA_PAR: i64 = 0;
    /// Bound to a thread index.
    pub const THREAD_INDEX: i64 = 1;
    /// A commutative reduction axis.
    pub const COMM_REDUCE: i64 = 2;
    /// A serial axis whose order matters.
    pub const ORDERED: i64 = 3;
    /// Anything else.
    pub const OPAQUE: i64 = 4;
}

/// An iteration variable (`te.IterVar`): a variable with its domain and kind.
#[derive(Object)]
#[object(type_key = "te.IterVar")]
#[repr(C)]
pub struct IterVarObj {
    /// The domain, when known (split and fuse results get theirs from bound inference).
    pub dom: Option<Range>,
    /// The variable.
    pub var: Var,
    /// The kind ([`iter_type`]).
    pub iter_type: i64,
    /// The thread tag (empty when not bound to a thread).
    pub thread_tag: IrString,
}

/// An iteration variable handle. Equality and hashing follow the variable's identity.
#[derive(Clone, ObjectRef)]
pub struct IterVar(ObjectRef<IterVarObj>);

impl IterVar {
    /// A new iteration variable over `dom` (or without a domain) for `var`.
    pub fn new(dom: Option<Range>, var: Var, iter_type: i64) -> IterVar {
        IterVar(ObjectRef::new(IterVarObj {
            dom,
            var,
            iter_type,
            thread_tag: "".into(),
        }))
    }

    /// As [`IterVar::new`], with a thread tag (`blockIdx.x`, `threadIdx.y`, ...; empty for
    /// none).
    pub fn with_tag(dom: Option<Range>, var: Var, iter_type: i64, thread_tag: &str) -> IterVar {
        IterVar(ObjectRef::new(IterVarObj {
            dom,
            var,
            iter_type,
            thread_tag: thread_tag.into(),
        }))
    }

    /// The thread tag (empty when the variable is not a thread axis).
    pub fn thread_tag(&self) -> &str {
        &self.0.thread_tag
    }

    /// The domain, if known.
    pub fn dom(&self) -> Option<&Range> {
        self.0.dom.as_ref()
    }

    /// The variable.
    pub fn var(&self) -> &Var {
        &self.0.var
    }

    /// The variable as an expression.
    pub fn expr(&self) -> PrimExpr {
        self.0.var.to_expr()
    }

    /// The kind ([`iter_type`]).
    pub fn iter_type(&self) -> i64 {
        self.0.iter_type
    }

    /// True for a reduction axis.
    pub fn is_reduce(&self) -> bool {
        self.0.iter_type == iter_type::COMM_REDUCE
    }

    /// The variable's name.
    pub fn name(&self) -> &str {
        self.0.var.name()
    }
}

impl PartialEq for IterVar {
    fn eq(&self, other: &IterVar) -> bool {
        self.0.var == other.0.var
    }
}
impl Eq for IterVar {}
impl Hash for IterVar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.var.hash(state)
    }
}

impl fmt::Debug for IterVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.dom() {
            Some(d) => write!(f, "IterVar({}, {d})", self.name()),
            None => write!(f, "IterVar({})", self.name()),
        }
    }
}

/// The parent of every operation (`te.Operation`): name, tag and attributes.
#[derive(Object)]
#[object(type_key = "te.Operation")]
#[repr(C)]
pub struct OperationObj {
    /// The name (also the name of its output buffers).
    pub name: IrString,
    /// A free-form tag (TOPI uses it to pick schedules).
    pub tag: IrString,
    /// Free-form attributes.
    pub attrs: Map,
}

/// An input tensor (`te.PlaceholderOp`).
#[derive(Object)]
#[object(type_key = "te.PlaceholderOp", parent = OperationObj)]
#[repr(C)]
pub struct PlaceholderOpObj {
    /// Name, tag, attributes.
    #[object(base)]
    pub parent: OperationObj,
    /// The shape (entries may be symbolic).
    pub shape: NodeList<PrimExpr>,
    /// The element type.
    pub dtype: DataType,
}

/// A tensor computed point by point (`te.ComputeOp`).
#[derive(Object)]
#[object(type_key = "te.ComputeOp", parent = OperationObj)]
#[repr(C)]
pub struct ComputeOpObj {
    /// Name, tag, attributes.
    #[object(base)]
    pub parent: OperationObj,
    /// One data-parallel iteration variable per output dimension.
    pub axis: NodeList<IterVar>,
    /// The reduction variables (empty unless the body is a reduction).
    pub reduce_axis: NodeList<IterVar>,
    /// One expression per output, in terms of the axis variables (a reduction is a
    /// `te.reduce` call; see [`crate::reduce`]).
    pub body: NodeList<PrimExpr>,
}

impl ComputeOpObj {
    /// `e` (one of this operation's bodies, or any expression over its axes) with each axis
    /// variable replaced by the index of the same position in `indices`: the value this
    /// operation reads as at those indices (what inlining it puts in its reader's place).
    pub fn at_indices(&self, e: &PrimExpr, indices: &[PrimExpr]) -> PrimExpr {
        let map: std::collections::HashMap<Var, PrimExpr> = self
            .axis
            .iter()
            .zip(indices)
            .map(|(iv, i)| (iv.var().clone(), i.clone()))
            .collect();
        kiln_tir::mutator::substitute(e, &map)
    }
}

/// An operation handle. Equality and hashing are by identity.
#[derive(Clone, ObjectRef)]
#[object_ref(methods)]
pub struct Operation(ObjectRef<OperationObj>);

/// What an operation is.
pub enum OpKind<'a> {
    /// An input.
    Placeholder(&'a PlaceholderOpObj),
    /// A computed tensor.
    Compute(&'a ComputeOpObj),
    /// A tensor computed by a TIR statement.
    Extern(&'a ExternOpObj),
}

pub(crate) fn upcast_op<T: ObjectType>(r: ObjectRef<T>) -> Operation {
    Operation(
        r.upcast()
            .downcast::<OperationObj>()
            .unwrap_or_else(|_| unreachable!("operation subtypes derive from te.Operation")),
    )
}

impl Operation {
    /// A placeholder operation.
    pub fn placeholder(name: &str, shape: Vec<PrimExpr>, dtype: DataType) -> Operation {
        upcast_op(ObjectRef::new(PlaceholderOpObj {
            parent: OperationObj {
                name: name.into(),
                tag: "".into(),
                attrs: Map::new(Vec::new()),
            },
            shape: shape.into(),
            dtype,
        }))
    }

    /// A compute operation from its parts (what `te.ComputeOp` builds for Python).
    pub fn compute(
        name: &str,
        tag: &str,
        attrs: Map,
        axis: Vec<IterVar>,
        reduce_axis: Vec<IterVar>,
        body: Vec<PrimExpr>,
    ) -> Operation {
        upcast_op(ObjectRef::new(ComputeOpObj {
            parent: OperationObj {
                name: name.into(),
                tag: tag.into(),
                attrs,
            },
            axis: axis.into(),
            reduce_axis: reduce_axis.into(),
            body: body.into(),
        }))
    }

    /// What kind of operation this is.
    pub fn kind(&self) -> OpKind<'_> {
        let idx = self.0.type_index();
        let ptr = self.0.payload_ptr();
        if idx == PlaceholderOpObj::type_index() {
            // SAFETY: the type index says the payload is a PlaceholderOpObj, which starts with
            // OperationObj; the reference lives as long as `self`.
            OpKind::Placeholder(unsafe { &*(ptr as *const PlaceholderOpObj) })
        } else if idx == ComputeOpObj::type_index() {
            // SAFETY: as above, for ComputeOpObj.
            OpKind::Compute(unsafe { &*(ptr as *const ComputeOpObj) })
        } else if idx == ExternOpObj::type_index() {
            // SAFETY: as above, for ExternOpObj.
            OpKind::Extern(unsafe { &*(ptr as *const ExternOpObj) })
        } else {
            unreachable!("unknown operation type {}", self.0.type_key())
        }
    }

    /// The compute node, when this is a compute operation.
    pub fn as_compute(&self) -> Option<&ComputeOpObj> {
        match self.kind() {
            OpKind::Compute(c) => Some(c),
            _ => None,
        }
    }

    /// The extern node, when this is an extern operation.
    pub fn as_extern(&self) -> Option<&ExternOpObj> {
        match self.kind() {
            OpKind::Extern(e) => Some(e),
            _ => None,
        }
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The tag.
    pub fn tag(&self) -> &str {
        &self.0.tag
    }

    /// The free-form attributes.
    pub fn attrs(&self) -> &Map {
        &self.0.attrs
    }

    /// The number of outputs.
    pub fn num_outputs(&self) -> usize {
        match self.kind() {
            OpKind::Placeholder(_) => 1,
            OpKind::Compute(c) => c.body.len(),
            OpKind::Extern(e) => e.output_placeholders.len(),
        }
    }

    /// The shape of the outputs (of the first, for an extern operation whose outputs differ).
    pub fn output_shape(&self) -> Vec<PrimExpr> {
        self.output_shape_of(0)
    }

    /// The shape of output `i`.
    pub fn output_shape_of(&self, i: usize) -> Vec<PrimExpr> {
        match self.kind() {
            OpKind::Placeholder(p) => p.shape.to_vec(),
            OpKind::Extern(e) => e.output_placeholders[i].shape().to_vec(),
            OpKind::Compute(c) => c
                .axis
                .iter()
                .map(|iv| {
                    iv.dom()
                        .expect("compute axes have domains")
                        .extent()
                        .clone()
                })
                .collect(),
        }
    }

    /// The element type of output `i`.
    pub fn output_dtype(&self, i: usize) -> DataType {
        match self.kind() {
            OpKind::Placeholder(p) => p.dtype,
            OpKind::Compute(c) => c.body[i].dtype(),
            OpKind::Extern(e) => e.output_placeholders[i].dtype(),
        }
    }

    /// Output `i` as a tensor (a new handle each call; tensors compare by operation and index).
    pub fn output(&self, i: usize) -> Tensor {
        assert!(i < self.num_outputs(), "{} has no output {i}", self.name());
        let name = if i == 0 {
            self.name().to_string()
        } else {
            format!("{}.v{i}", self.name())
        };
        let shape = self.output_shape_of(i);
        let index_t = shape
            .first()
            .map(|s| s.dtype())
            .unwrap_or(DataType::int(32));
        let obj = ObjectRef::new(TensorObj {
            parent: BufferObj {
                data: Var::handle(&name),
                dtype: self.output_dtype(i),
                shape: shape.into(),
                strides: NodeList::empty(),
                elem_offset: PrimExpr::const_int(index_t, 0),
                name: name.as_str().into(),
                scope: "global".into(),
                data_alignment: DEFAULT_ALIGNMENT,
                offset_factor: 1,
            },
            op: self.clone(),
            value_index: i as i64,
        });
        Tensor(obj)
    }

    /// The tensors this operation reads (each once, in order of first use).
    pub fn input_tensors(&self) -> Vec<Tensor> {
        let mut out: Vec<Tensor> = Vec::new();
        if let OpKind::Extern(e) = self.kind() {
            for t in e.inputs.iter() {
                if !out.contains(t) {
                    out.push(t.clone());
                }
            }
        }
        if let OpKind::Compute(c) = self.kind() {
            for b in c.body.iter() {
                post_order_visit_expr(b, |e| {
                    if let ExprKind::BufferLoad { buffer, .. } = e.kind() {
                        if let Some(t) = Tensor::from_buffer(buffer) {
                            if !out.contains(&t) {
                                out.push(t);
                            }
                        }
                    }
                });
            }
        }
        out
    }

    pub(crate) fn key(&self) -> usize {
        self.0.as_ptr().as_ptr() as usize
    }
}

impl PartialEq for Operation {
    fn eq(&self, other: &Operation) -> bool {
        self.same_as(other)
    }
}
impl Eq for Operation {}
impl Hash for Operation {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state)
    }
}

impl fmt::Debug for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.0.type_key(), self.name())
    }
}

/// A tensor (`te.Tensor`): output `value_index` of `op`, also usable as a `tir.Buffer` whose
/// loads are the tensor's reads.
#[derive(Object)]
#[object(type_key = "te.Tensor", parent = BufferObj)]
#[repr(C)]
pub struct TensorObj {
    /// The buffer view: name, dtype, shape.
    #[object(base)]
    pub parent: BufferObj,
    /// The producing operation.
    pub op: Operation,
    /// Which output of `op`.
    pub value_index: i64,
}

/// A tensor handle. Equality and hashing are by operation and output index.
#[derive(Clone, ObjectRef)]
pub struct Tensor(ObjectRef<TensorObj>);

impl Tensor {
    /// The tensor that a buffer is, when it is one.
    pub fn from_buffer(b: &Buffer) -> Option<Tensor> {
        b.object()
            .clone()
            .upcast()
            .downcast::<TensorObj>()
            .ok()
            .map(Tensor)
    }

    /// The tensor seen as a `tir.Buffer`.
    pub fn as_buffer(&self) -> Buffer {
        let any: Any = self.0.clone().into();
        any.try_as::<Buffer>()
            .unwrap_or_else(|_| unreachable!("te.Tensor derives from tir.Buffer"))
    }

    /// The producing operation.
    pub fn op(&self) -> &Operation {
        &self.0.op
    }

    /// Which output of the operation.
    pub fn value_index(&self) -> usize {
        self.0.value_index as usize
    }

    /// The shape.
    pub fn shape(&self) -> &[PrimExpr] {
        &self.0.parent.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DataType {
        self.0.parent.dtype
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.0.parent.name
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape().len()
    }

    /// Data-parallel axis `i` of the producing compute operation.
    ///
    /// # Panics
    /// When the tensor is a placeholder or has fewer dimensions.
    pub fn axis(&self, i: usize) -> IterVar {
        self.op()
            .as_compute()
            .expect("axis of a compute tensor")
            .axis[i]
            .clone()
    }

    /// Reduction axis `i` of the producing compute operation.
    ///
    /// # Panics
    /// When the tensor is a placeholder or has fewer reduction axes.
    pub fn reduce_axis(&self, i: usize) -> IterVar {
        self.op()
            .as_compute()
            .expect("reduce_axis of a compute tensor")
            .reduce_axis[i]
            .clone()
    }

    /// The read `self[indices]` (TVM's `ProducerLoad`): a `tir.BufferLoad` of this tensor.
    /// Integer literals are accepted through `PrimExpr::i32`.
    ///
    /// # Panics
    /// On a wrong number of indices or non-integer indices.
    pub fn at(&self, indices: &[PrimExpr]) -> PrimExpr {
        self.try_at(indices).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Tensor::at`], with an error instead of a panic.
    pub fn try_at(&self, indices: &[PrimExpr]) -> kiln_ffi::Result<PrimExpr> {
        PrimExpr::try_buffer_load(self.as_buffer(), indices.to_vec())
    }

    /// `self[vars]` for index variables.
    pub fn at_vars(&self, vars: &[Var]) -> PrimExpr {
        self.at(&vars.iter().map(Var::to_expr).collect::<Vec<_>>())
    }
}

impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        self.op() == other.op() && self.value_index() == other.value_index()
    }
}
impl Eq for Tensor {}
impl Hash for Tensor {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.op().hash(state);
        self.value_index().hash(state);
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor({}, {:?}, {})",
            self.name(),
            self.shape(),
            self.dtype()
        )
    }
}

/// An input tensor of `shape` (entries may be symbolic, e.g. a `Var`) and `dtype`.
pub fn placeholder(shape: &[PrimExpr], dtype: DataType, name: &str) -> Tensor {
    Operation::placeholder(name, shape.to_vec(), dtype).output(0)
}

/// A new reduction axis over `range` (TVM's `te.reduce_axis`).
pub fn reduce_axis(range: Range, name: &str) -> IterVar {
    let var = Var::new(name, range.extent().dtype());
    IterVar::new(Some(range), var, iter_type::COMM_REDUCE)
}

/// A reduction axis over `[0, extent)`.
pub fn reduce_axis_n(extent: impl Into<kiln_tir::Operand>, name: &str) -> IterVar {
    reduce_axis(Range::from_min_extent(0, extent), name)
}

const AXIS_NAMES: [&str; 6] = ["i", "j", "k", "l", "m", "n"];

/// The data-parallel axes of a compute of `shape`: `i`, `j`, `k`, ... over `[0, extent)`.
pub fn compute_axes(shape: &[PrimExpr]) -> Vec<IterVar> {
    shape
        .iter()
        .enumerate()
        .map(|(d, ext)| {
            let name = AXIS_NAMES
                .get(d)
                .map(|s| s.to_string())
                .unwrap_or_else(|| format!("i{d}"));
            let var = Var::new(&name, ext.dtype());
            IterVar::new(
                Some(Range::from_min_extent(
                    PrimExpr::const_int(ext.dtype(), 0),
                    ext.clone(),
                )),
                var,
                iter_type::DATA_PAR,
            )
        })
        .collect()
}

/// A tensor of `shape` whose element at `indices` is `f(indices)` (TVM's `te.compute`). The
/// body may be a reduction ([`crate::sum`] and friends) at its top.
///
/// ```
/// use kiln_te::*;
/// use kiln_tir::{DataType, PrimExpr};
/// let n = PrimExpr::i32(16);
/// let a = placeholder(&[n.clone()], DataType::float(32), "A");
/// let b = compute(&[n], |i| a.at_vars(i) * 2.0, "B");
/// assert_eq!(b.op().input_tensors(), vec![a]);
/// ```
pub fn compute(shape: &[PrimExpr], f: impl FnOnce(&[Var]) -> PrimExpr, name: &str) -> Tensor {
    compute_multi(shape, |v| vec![f(v)], name)
        .pop()
        .expect("one output")
}

/// A compute with several outputs of one shape, computed in one loop nest.
///
/// # Panics
/// When a body mixes reductions and plain values, or outputs have different reductions.
pub fn compute_multi(
    shape: &[PrimExpr],
    f: impl FnOnce(&[Var]) -> Vec<PrimExpr>,
    name: &str,
) -> Vec<Tensor> {
    let axis = compute_axes(shape);
    let vars: Vec<Var> = axis.iter().map(|iv| iv.var().clone()).collect();
    let body = f(&vars);
    let op =
        compute_op(name, "", Map::new(Vec::new()), axis, body).unwrap_or_else(|e| panic!("{e}"));
    (0..op.num_outputs()).map(|i| op.output(i)).collect()
}

/// Builds a compute operation from axes and bodies, taking the reduction axes from the body
/// (what the Python `te.ComputeOp` global does).
pub fn compute_op(
    name: &str,
    tag: &str,
    attrs: Map,
    axis: Vec<IterVar>,
    body: Vec<PrimExpr>,
) -> kiln_ffi::Result<Operation> {
    if body.is_empty() {
        return Err(kiln_ffi::Error::value_error(format!(
            "te.compute `{name}`: no output"
        )));
    }
    let reduces: Vec<Option<crate::reduce::Reduce>> =
        body.iter().map(crate::reduce::Reduce::decode).collect();
    let reduce_axis = match &reduces[0] {
        Some(r) => r.axis.clone(),
        None => Vec::new(),
    };
    for r in &reduces {
        let same = match r {
            Some(r) => r.axis == reduce_axis && !reduce_axis.is_empty(),
            None => reduce_axis.is_empty(),
        };
        if !same {
            return Err(kiln_ffi::Error::value_error(format!(
                "te.compute `{name}`: every output must be the same kind of reduction (or none)"
            )));
        }
    }
    Ok(Operation::compute(
        name,
        tag,
        attrs,
        axis,
        reduce_axis,
        body,
    ))
}
