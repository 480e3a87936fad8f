//! Graph expression nodes (Relay's dataflow fragment): operators, variables, constants,
//! calls, tuples, tuple projections and functions.
//!
//! Every node is a reflected `kiln-ffi` object (type keys `graph.*`), so C, Python and JSON can
//! walk and rebuild them. [`Expr`] is the handle Rust code holds: an enum over the node
//! references, cheap to clone. Nodes are immutable; `checked_type` is filled by
//! [`InferType`](crate::transform::infer_type), which rebuilds the nodes it types.

use super::attrs::Attrs;
use super::ty::Type;
use kiln_ffi::{Error, Map, Object, ObjectRef, Result};
use kiln_runtime::tensor::Tensor;
use kiln_tir::node::IrString;
use kiln_tir::NodeList;

/// A reference to a registered operator (`graph.Op`), the callee of operator calls.
#[derive(Object)]
#[object(type_key = "graph.Op")]
#[repr(C)]
pub struct OpObj {
    /// The registered name (`"nn.conv2d"`).
    pub name: IrString,
}

/// A variable (`graph.Var`): a function parameter. Compared by identity.
#[derive(Object)]
#[object(type_key = "graph.Var")]
#[repr(C)]
pub struct VarObj {
    /// The name used when printing (and the graph input name).
    pub name_hint: IrString,
    /// The declared type.
    pub type_annotation: Option<Type>,
    /// The inferred type.
    pub checked_type: Option<Type>,
}

/// A constant tensor (`graph.Constant`), e.g. a weight.
#[derive(Object)]
#[object(type_key = "graph.Constant")]
#[repr(C)]
pub struct ConstantObj {
    /// The value (on the CPU).
    pub data: Tensor,
    /// The inferred type.
    pub checked_type: Option<Type>,
}

/// A call (`graph.Call`) of an operator ([`OpObj`]) or a function with attributes.
#[derive(Object)]
#[object(type_key = "graph.Call")]
#[repr(C)]
pub struct CallObj {
    /// The callee: an `Op` or a `Function` (fused primitive functions).
    pub op: Expr,
    /// The arguments.
    pub args: NodeList<Expr>,
    /// Attribute name -> value, completed with the op's defaults (see [`Attrs`]).
    pub attrs: Map,
    /// The inferred type.
    pub checked_type: Option<Type>,
}

/// A tuple of values (`graph.Tuple`).
#[derive(Object)]
#[object(type_key = "graph.Tuple")]
#[repr(C)]
pub struct TupleObj {
    /// The fields.
    pub fields: NodeList<Expr>,
    /// The inferred type.
    pub checked_type: Option<Type>,
}

/// Field `index` of a tuple value (`graph.TupleGetItem`).
#[derive(Object)]
#[object(type_key = "graph.TupleGetItem")]
#[repr(C)]
pub struct TupleGetItemObj {
    /// The tuple.
    pub tuple: Expr,
    /// The field index.
    pub index: i64,
    /// The inferred type.
    pub checked_type: Option<Type>,
}

/// A function (`graph.Function`). `attrs["Primitive"] = 1` marks a fused group made by
/// `FuseOps`, which later lowers to one tensor program.
#[derive(Object)]
#[object(type_key = "graph.Function")]
#[repr(C)]
pub struct FunctionObj {
    /// The parameters.
    pub params: NodeList<Var>,
    /// The result.
    pub body: Expr,
    /// The declared result type.
    pub ret_type: Option<Type>,
    /// Function attributes (`Primitive`, ...).
    pub attrs: Map,
    /// The inferred type (the result type: graph functions are not first-class values here).
    pub checked_type: Option<Type>,
}

/// A variable handle (a function parameter).
#[derive(Clone, ObjectRef)]
#[object_ref(methods)]
pub struct Var(pub ObjectRef<VarObj>);

/// A function handle.
#[derive(Clone, ObjectRef)]
pub struct Function(pub ObjectRef<FunctionObj>);

/// A graph expression. Cheap to clone.
#[derive(Clone, ObjectRef)]
#[object_ref(type_name = "graph.Expr")]
pub enum Expr {
    /// An operator reference (only as a callee).
    Op(ObjectRef<OpObj>),
    /// A variable.
    Var(Var),
    /// A constant.
    Constant(ObjectRef<ConstantObj>),
    /// A call.
    Call(ObjectRef<CallObj>),
    /// A tuple.
    Tuple(ObjectRef<TupleObj>),
    /// A tuple projection.
    TupleGetItem(ObjectRef<TupleGetItemObj>),
    /// A function.
    Function(Function),
}

impl Var {
    /// A new variable of type `ty`.
    pub fn new(name: &str, ty: Type) -> Var {
        Var(ObjectRef::new(VarObj {
            name_hint: name.into(),
            type_annotation: Some(ty),
            checked_type: None,
        }))
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.0.name_hint
    }

    /// The declared type.
    pub fn ty(&self) -> Option<&Type> {
        self.0.type_annotation.as_ref()
    }

    /// As an expression.
    pub fn expr(&self) -> Expr {
        Expr::Var(self.clone())
    }
}

impl Function {
    /// A function without attributes.
    pub fn new(params: Vec<Var>, body: Expr) -> Function {
        Function::with_attrs(params, body, Map::new(Vec::new()))
    }

    /// A function with attributes.
    pub fn with_attrs(params: Vec<Var>, body: Expr, attrs: Map) -> Function {
        Function(ObjectRef::new(FunctionObj {
            params: params.into(),
            body,
            ret_type: None,
            attrs,
            checked_type: None,
        }))
    }

    /// The parameters.
    pub fn params(&self) -> &[Var] {
        &self.0.params
    }

    /// The body.
    pub fn body(&self) -> &Expr {
        &self.0.body
    }

    /// The attributes.
    pub fn attrs(&self) -> &Map {
        &self.0.attrs
    }

    /// True for a fused group (`Primitive = 1`).
    pub fn is_primitive(&self) -> bool {
        self.0
            .attrs
            .get("Primitive")
            .and_then(|v| v.try_as::<i64>().ok())
            == Some(1)
    }

    /// The same function with another body (attributes kept).
    pub fn with_body(&self, params: Vec<Var>, body: Expr) -> Function {
        Function::with_attrs(params, body, self.0.attrs.clone())
    }
}

impl Expr {
    /// A reference to operator `name` (not checked against the registry).
    pub fn op(name: &str) -> Expr {
        Expr::Op(ObjectRef::new(OpObj { name: name.into() }))
    }

    /// A new variable expression.
    pub fn var(name: &str, ty: Type) -> Expr {
        Expr::Var(Var::new(name, ty))
    }

    /// A constant.
    pub fn constant(data: Tensor) -> Expr {
        Expr::Constant(ObjectRef::new(ConstantObj {
            data,
            checked_type: None,
        }))
    }

    /// A `float32` constant of `shape` from values.
    pub fn const_f32(values: &[f32], shape: &[i64]) -> Expr {
        Expr::constant(Tensor::from_slice(values, shape).expect("const_f32: values fit the shape"))
    }

    /// A scalar `float32` constant.
    pub fn scalar_f32(v: f32) -> Expr {
        Expr::const_f32(&[v], &[])
    }

    /// A call of `callee` without attribute normalization (see [`crate::op::call`] for op
    /// calls with defaults and validation).
    pub fn call_raw(callee: Expr, args: Vec<Expr>, attrs: Map) -> Expr {
        Expr::Call(ObjectRef::new(CallObj {
            op: callee,
            args: args.into(),
            attrs,
            checked_type: None,
        }))
    }

    /// A tuple.
    pub fn tuple(fields: Vec<Expr>) -> Expr {
        Expr::Tuple(ObjectRef::new(TupleObj {
            fields: fields.into(),
            checked_type: None,
        }))
    }

    /// Field `index` of a tuple.
    pub fn get_item(tuple: Expr, index: usize) -> Expr {
        Expr::TupleGetItem(ObjectRef::new(TupleGetItemObj {
            tuple,
            index: index as i64,
            checked_type: None,
        }))
    }

    /// The identity of the node (its address): the key of memo tables.
    pub fn key(&self) -> usize {
        (match self {
            Expr::Op(r) => r.as_ptr(),
            Expr::Var(v) => v.0.as_ptr(),
            Expr::Constant(r) => r.as_ptr(),
            Expr::Call(r) => r.as_ptr(),
            Expr::Tuple(r) => r.as_ptr(),
            Expr::TupleGetItem(r) => r.as_ptr(),
            Expr::Function(f) => f.0.as_ptr(),
        })
        .as_ptr() as usize
    }

    /// True when both handles point to the same node.
    pub fn same_as(&self, other: &Expr) -> bool {
        self.key() == other.key()
    }

    /// The inferred type, if `InferType` ran.
    pub fn checked_type(&self) -> Option<&Type> {
        match self {
            Expr::Op(_) => None,
            Expr::Var(v) => v.0.checked_type.as_ref().or(v.0.type_annotation.as_ref()),
            Expr::Constant(r) => r.checked_type.as_ref(),
            Expr::Call(r) => r.checked_type.as_ref(),
            Expr::Tuple(r) => r.checked_type.as_ref(),
            Expr::TupleGetItem(r) => r.checked_type.as_ref(),
            Expr::Function(f) => f.0.checked_type.as_ref(),
        }
    }

    /// The inferred type, or an error naming the node when `InferType` has not run.
    pub fn ty(&self) -> Result<Type> {
        if let Expr::Constant(c) = self {
            return Ok(Type::tensor(c.data.shape(), c.data.dtype()));
        }
        self.checked_type().cloned().ok_or_else(|| {
            Error::value_error(format!(
                "the type of `{}` is not known: run InferType first",
                crate::ir::printer::short(self)
            ))
        })
    }

    /// The operator name when this is a call of an operator.
    pub fn op_name(&self) -> Option<&str> {
        match self {
            Expr::Call(c) => match &c.op {
                Expr::Op(o) => Some(o.name.as_str()),
                _ => None,
            },
            _ => None,
        }
    }

    /// The call node, when this is a call.
    pub fn as_call(&self) -> Option<&CallObj> {
        match self {
            Expr::Call(c) => Some(c),
            _ => None,
        }
    }

    /// The call's arguments (empty for other nodes).
    pub fn args(&self) -> &[Expr] {
        match self {
            Expr::Call(c) => &c.args,
            _ => &[],
        }
    }

    /// The call's attributes (empty for other nodes).
    pub fn attrs(&self) -> Attrs<'_> {
        match self {
            Expr::Call(c) => Attrs::new(&c.attrs),
            _ => Attrs::empty(),
        }
    }

    /// The constant's value.
    pub fn as_constant(&self) -> Option<&Tensor> {
        match self {
            Expr::Constant(c) => Some(&c.data),
            _ => None,
        }
    }

    /// The same node with `ty` as its checked type (a new node; vars keep their identity
    /// unless the type changes).
    pub fn with_type(&self, ty: Type) -> Expr {
        match self {
            Expr::Op(_) => self.clone(),
            Expr::Var(v) => {
                if v.0.checked_type.as_ref() == Some(&ty) {
                    self.clone()
                } else {
                    Expr::Var(Var(ObjectRef::new(VarObj {
                        name_hint: v.0.name_hint.clone(),
                        type_annotation: v.0.type_annotation.clone(),
                        checked_type: Some(ty),
                    })))
                }
            }
            Expr::Constant(c) => Expr::Constant(ObjectRef::new(ConstantObj {
                data: c.data.clone(),
                checked_type: Some(ty),
            })),
            Expr::Call(c) => Expr::Call(ObjectRef::new(CallObj {
                op: c.op.clone(),
                args: c.args.clone(),
                attrs: c.attrs.clone(),
                checked_type: Some(ty),
            })),
            Expr::Tuple(t) => Expr::Tuple(ObjectRef::new(TupleObj {
                fields: t.fields.clone(),
                checked_type: Some(ty),
            })),
            Expr::TupleGetItem(g) => Expr::TupleGetItem(ObjectRef::new(TupleGetItemObj {
                tuple: g.tuple.clone(),
                index: g.index,
                checked_type: Some(ty),
            })),
            Expr::Function(f) => Expr::Function(Function(ObjectRef::new(FunctionObj {
                params: f.0.params.clone(),
                body: f.0.body.clone(),
                ret_type: Some(ty.clone()),
                attrs: f.0.attrs.clone(),
                checked_type: Some(ty),
            }))),
        }
    }
}

impl std::fmt::Display for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::ir::printer::print_expr(self))
    }
}

impl std::fmt::Debug for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::fmt::Display for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::ir::printer::print_expr(&Expr::Function(
            self.clone(),
        )))
    }
}
