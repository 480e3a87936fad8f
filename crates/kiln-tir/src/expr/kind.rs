//! [`ExprKind`]: a borrowed, `match`-friendly view of what an expression node is.

use super::nodes::*;
use super::{PrimExpr, Var};
use crate::buffer::Buffer;
use crate::node::{payload, TagTable};
use kiln_ffi::ObjectType;
use std::sync::OnceLock;

/// What an expression is, with borrowed access to its operands.
///
/// ```
/// use kiln_tir::*;
/// let x = Var::int32("x");
/// let e = &x + 1;
/// match e.kind() {
///     ExprKind::Binary(BinOp::Add, a, b) => {
///         assert!(a.as_var() == Some(x.clone()));
///         assert_eq!(b.as_int(), Some(1));
///     }
///     _ => unreachable!(),
/// }
/// ```
/// The node's dtype is `e.dtype()`.
#[derive(Clone, Debug)]
pub enum ExprKind<'a> {
    /// An integer or bool constant.
    IntImm(i64),
    /// A floating-point constant.
    FloatImm(f64),
    /// A string constant.
    StringImm(&'a str),
    /// A variable (also a `SizeVar`; see [`Var::is_size_var`]).
    Var(Var),
    /// A two-operand node: arithmetic, comparison or logic.
    Binary(BinOp, &'a PrimExpr, &'a PrimExpr),
    /// Logical negation.
    Not(&'a PrimExpr),
    /// A conversion to the node's dtype.
    Cast(&'a PrimExpr),
    /// `cond ? t : f`.
    Select {
        /// The condition.
        cond: &'a PrimExpr,
        /// The value when true.
        t: &'a PrimExpr,
        /// The value when false.
        f: &'a PrimExpr,
    },
    /// `let var = value in body`.
    Let {
        /// The bound variable.
        var: &'a Var,
        /// Its value.
        value: &'a PrimExpr,
        /// The body.
        body: &'a PrimExpr,
    },
    /// `buffer[indices]`.
    BufferLoad {
        /// The buffer.
        buffer: &'a Buffer,
        /// The indices.
        indices: &'a [PrimExpr],
    },
    /// `[base + k*stride for k in 0..lanes]`.
    Ramp {
        /// First lane.
        base: &'a PrimExpr,
        /// Step.
        stride: &'a PrimExpr,
        /// Lane count.
        lanes: i64,
    },
    /// `value` in every lane.
    Broadcast {
        /// The scalar.
        value: &'a PrimExpr,
        /// Lane count.
        lanes: i64,
    },
    /// A call of an operator by name.
    Call {
        /// The operator name (`"tir.exp"`, ...).
        op: &'a str,
        /// The arguments.
        args: &'a [PrimExpr],
    },
}

/// The node kinds by type index (what `kind()` dispatches on).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ExprTag {
    IntImm,
    FloatImm,
    StringImm,
    Var,
    Binary(BinOp),
    Not,
    Cast,
    Select,
    Let,
    BufferLoad,
    Ramp,
    Broadcast,
    Call,
}

fn table() -> &'static TagTable<ExprTag> {
    static TABLE: OnceLock<TagTable<ExprTag>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut entries = vec![
            (IntImmObj::type_index(), ExprTag::IntImm),
            (FloatImmObj::type_index(), ExprTag::FloatImm),
            (StringImmObj::type_index(), ExprTag::StringImm),
            (VarObj::type_index(), ExprTag::Var),
            (SizeVarObj::type_index(), ExprTag::Var),
            (NotObj::type_index(), ExprTag::Not),
            (CastObj::type_index(), ExprTag::Cast),
            (SelectObj::type_index(), ExprTag::Select),
            (LetObj::type_index(), ExprTag::Let),
            (BufferLoadObj::type_index(), ExprTag::BufferLoad),
            (RampObj::type_index(), ExprTag::Ramp),
            (BroadcastObj::type_index(), ExprTag::Broadcast),
            (CallObj::type_index(), ExprTag::Call),
        ];
        entries.extend(
            BinOp::ALL
                .iter()
                .map(|&op| (op.type_index(), ExprTag::Binary(op))),
        );
        TagTable::build(entries)
    })
}

/// The tag of an object type index, when it is a concrete expression node.
#[inline]
pub(crate) fn expr_tag(type_index: i32) -> Option<ExprTag> {
    table().get(type_index)
}

impl PrimExpr {
    #[inline]
    pub(crate) fn tag(&self) -> ExprTag {
        // Handles are only made from concrete nodes (constructors and checked conversions).
        expr_tag(self.object().type_index()).expect("a PrimExpr handle holds a concrete node")
    }

    /// What this expression is; see [`ExprKind`].
    pub fn kind(&self) -> ExprKind<'_> {
        let o = self.object();
        // SAFETY: each arm reads the payload type that the tag (from the type index) names.
        unsafe {
            match self.tag() {
                ExprTag::IntImm => ExprKind::IntImm(payload::<IntImmObj, _>(o).value),
                ExprTag::FloatImm => ExprKind::FloatImm(payload::<FloatImmObj, _>(o).value),
                ExprTag::StringImm => {
                    ExprKind::StringImm(payload::<StringImmObj, _>(o).value.as_str())
                }
                ExprTag::Var => ExprKind::Var(Var::from_expr_unchecked(self)),
                ExprTag::Binary(op) => {
                    let (a, b) = op.operands(self);
                    ExprKind::Binary(op, a, b)
                }
                ExprTag::Not => ExprKind::Not(&payload::<NotObj, _>(o).a),
                ExprTag::Cast => ExprKind::Cast(&payload::<CastObj, _>(o).value),
                ExprTag::Select => {
                    let n = payload::<SelectObj, _>(o);
                    ExprKind::Select {
                        cond: &n.condition,
                        t: &n.true_value,
                        f: &n.false_value,
                    }
                }
                ExprTag::Let => {
                    let n = payload::<LetObj, _>(o);
                    ExprKind::Let {
                        var: &n.var,
                        value: &n.value,
                        body: &n.body,
                    }
                }
                ExprTag::BufferLoad => {
                    let n = payload::<BufferLoadObj, _>(o);
                    ExprKind::BufferLoad {
                        buffer: &n.buffer,
                        indices: &n.indices,
                    }
                }
                ExprTag::Ramp => {
                    let n = payload::<RampObj, _>(o);
                    ExprKind::Ramp {
                        base: &n.base,
                        stride: &n.stride,
                        lanes: n.lanes,
                    }
                }
                ExprTag::Broadcast => {
                    let n = payload::<BroadcastObj, _>(o);
                    ExprKind::Broadcast {
                        value: &n.value,
                        lanes: n.lanes,
                    }
                }
                ExprTag::Call => {
                    let n = payload::<CallObj, _>(o);
                    ExprKind::Call {
                        op: n.op.as_str(),
                        args: &n.args,
                    }
                }
            }
        }
    }

    /// The node's type key (`"tir.Add"`, ...).
    pub fn type_key(&self) -> &'static str {
        match self.tag() {
            ExprTag::IntImm => IntImmObj::TYPE_KEY,
            ExprTag::FloatImm => FloatImmObj::TYPE_KEY,
            ExprTag::StringImm => StringImmObj::TYPE_KEY,
            ExprTag::Var => {
                if self.object().type_index() == SizeVarObj::type_index() {
                    SizeVarObj::TYPE_KEY
                } else {
                    VarObj::TYPE_KEY
                }
            }
            ExprTag::Binary(op) => op.type_key(),
            ExprTag::Not => NotObj::TYPE_KEY,
            ExprTag::Cast => CastObj::TYPE_KEY,
            ExprTag::Select => SelectObj::TYPE_KEY,
            ExprTag::Let => LetObj::TYPE_KEY,
            ExprTag::BufferLoad => BufferLoadObj::TYPE_KEY,
            ExprTag::Ramp => RampObj::TYPE_KEY,
            ExprTag::Broadcast => BroadcastObj::TYPE_KEY,
            ExprTag::Call => CallObj::TYPE_KEY,
        }
    }
}
