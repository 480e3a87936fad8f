//! The expression node types: one `#[repr(C)]` payload per type key, each starting with
//! [`PrimExprObj`] (the `dtype`), reflected so C, Python and JSON can read and rebuild them.

use super::{PrimExpr, PrimExprObj, Var};
use crate::buffer::Buffer;
use crate::node::{IrString, NodeList};
use kiln_ffi::{DataType, Object, ObjectType};

/// Marks a node type whose payload starts with [`PrimExprObj`], so a reference to it can be
/// viewed as a [`PrimExpr`]; implemented by the node types of this module (build one directly
/// and wrap it with [`PrimExpr::from_node`]).
///
/// # Safety
/// The type must be `#[repr(C)]` with a `PrimExprObj` (directly or through its parent) as first
/// field.
pub unsafe trait ExprNode: ObjectType {}

/// An integer (or bool) constant: `tir.IntImm`. Unsigned 64-bit values keep their bit pattern.
#[derive(Object)]
#[object(type_key = "tir.IntImm", parent = PrimExprObj)]
#[repr(C)]
pub struct IntImmObj {
    /// The parent part: the dtype.
    #[object(base)]
    pub parent: PrimExprObj,
    /// The value.
    pub value: i64,
}

/// A floating-point constant: `tir.FloatImm`.
#[derive(Object)]
#[object(type_key = "tir.FloatImm", parent = PrimExprObj)]
#[repr(C)]
pub struct FloatImmObj {
    /// The parent part: the dtype.
    #[object(base)]
    pub parent: PrimExprObj,
    /// The value (rounded to the dtype when built through the checked constructors).
    pub value: f64,
}

/// A string constant (`tir.StringImm`, dtype `handle`): names in calls, assert messages.
#[derive(Object)]
#[object(type_key = "tir.StringImm", parent = PrimExprObj)]
#[repr(C)]
pub struct StringImmObj {
    /// The parent part: the dtype.
    #[object(base)]
    pub parent: PrimExprObj,
    /// The text.
    pub value: IrString,
}

/// A variable (`tir.Var`); compared by identity, `name_hint` is only for printing.
#[derive(Object)]
#[object(type_key = "tir.Var", parent = PrimExprObj)]
#[repr(C)]
pub struct VarObj {
    /// The parent part: the dtype.
    #[object(base)]
    pub parent: PrimExprObj,
    /// The name used when printing (not necessarily unique).
    pub name_hint: IrString,
}

/// A variable known to be non-negative (`tir.SizeVar`), for symbolic shapes.
#[derive(Object)]
#[object(type_key = "tir.SizeVar", parent = VarObj)]
#[repr(C)]
pub struct SizeVarObj {
    /// The parent part: the variable.
    #[object(base)]
    pub parent: VarObj,
}

/// Logical negation (`tir.Not`) of a bool expression.
#[derive(Object)]
#[object(type_key = "tir.Not", parent = PrimExprObj)]
#[repr(C)]
pub struct NotObj {
    /// The parent part: the dtype.
    #[object(base)]
    pub parent: PrimExprObj,
    /// The operand.
    pub a: PrimExpr,
}

/// A conversion (`tir.Cast`) of `value` to this node's dtype.
#[derive(Object)]
#[object(type_key = "tir.Cast", parent = PrimExprObj)]
#[repr(C)]
pub struct CastObj {
    /// The parent part: the dtype.
    #[object(base)]
    pub parent: PrimExprObj,
    /// The converted value.
    pub value: PrimExpr,
}

/// `condition ? true_value : false_value` with both sides evaluated (`tir.Select`).
#[derive(Object)]
#[object(type_key = "tir.Select", parent = PrimExprObj)]
#[repr(C)]
pub struct SelectObj {
    /// The parent part: the dtype.
    #[object(base)]
    pub parent: PrimExprObj,
    /// The bool condition.
    pub condition: PrimExpr,
    /// The value when true.
    pub true_value: PrimExpr,
    /// The value when false.
    pub false_value: PrimExpr,
}

/// `let var = value in body` (`tir.Let`).
#[derive(Object)]
#[object(type_key = "tir.Let", parent = PrimExprObj)]
#[repr(C)]
pub struct LetObj {
    /// The parent part: the dtype.
    #[object(base)]
    pub parent: PrimExprObj,
    /// The bound variable.
    pub var: Var,
    /// Its value.
    pub value: PrimExpr,
    /// The expression that may use `var`.
    pub body: PrimExpr,
}

/// A read of `buffer[indices]` (`tir.BufferLoad`).
#[derive(Object)]
#[object(type_key = "tir.BufferLoad", parent = PrimExprObj)]
#[repr(C)]
pub struct BufferLoadObj {
    /// The parent part: the dtype.
    #[object(base)]
    pub parent: PrimExprObj,
    /// The buffer read.
    pub buffer: Buffer,
    /// One index per buffer dimension (a vector index reads several lanes).
    pub indices: NodeList<PrimExpr>,
}

/// The vector `[base, base + stride, ..., base + (lanes-1)*stride]` (`tir.Ramp`).
#[derive(Object)]
#[object(type_key = "tir.Ramp", parent = PrimExprObj)]
#[repr(C)]
pub struct RampObj {
    /// The parent part: the dtype.
    #[object(base)]
    pub parent: PrimExprObj,
    /// The first lane.
    pub base: PrimExpr,
    /// The step between lanes.
    pub stride: PrimExpr,
    /// The number of lanes.
    pub lanes: i64,
}

/// A scalar repeated in every lane (`tir.Broadcast`).
#[derive(Object)]
#[object(type_key = "tir.Broadcast", parent = PrimExprObj)]
#[repr(C)]
pub struct BroadcastObj {
    /// The parent part: the dtype.
    #[object(base)]
    pub parent: PrimExprObj,
    /// The scalar.
    pub value: PrimExpr,
    /// The number of lanes.
    pub lanes: i64,
}

/// A call of an intrinsic, builtin or external function by name (`tir.Call`); see
/// [`crate::op`] for the names Kiln knows.
#[derive(Object)]
#[object(type_key = "tir.Call", parent = PrimExprObj)]
#[repr(C)]
pub struct CallObj {
    /// The parent part: the dtype.
    #[object(base)]
    pub parent: PrimExprObj,
    /// The operator name, e.g. `"tir.exp"`, `"tir.call_packed"`.
    pub op: IrString,
    /// The arguments.
    pub args: NodeList<PrimExpr>,
}

/// Marks node types whose payload starts with a `PrimExprObj`.
macro_rules! expr_nodes {
    ($($obj:ty),* $(,)?) => {$(
        // SAFETY: every type listed is #[repr(C)] with a PrimExprObj-rooted parent as first field.
        unsafe impl ExprNode for $obj {}
    )*};
}
expr_nodes!(
    IntImmObj,
    FloatImmObj,
    StringImmObj,
    VarObj,
    SizeVarObj,
    NotObj,
    CastObj,
    SelectObj,
    LetObj,
    BufferLoadObj,
    RampObj,
    BroadcastObj,
    CallObj,
);

macro_rules! binary_nodes {
    ($($op:ident => $obj:ident, $key:tt, $sym:tt, $doc:tt;)*) => {
        $(
            #[doc = $doc]
            #[derive(Object)]
            #[object(type_key = $key, parent = PrimExprObj)]
            #[repr(C)]
            pub struct $obj {
                /// The parent part: the dtype.
                #[object(base)]
                pub parent: PrimExprObj,
                /// The left operand.
                pub a: PrimExpr,
                /// The right operand.
                pub b: PrimExpr,
            }
            // SAFETY: #[repr(C)] with PrimExprObj first.
            unsafe impl ExprNode for $obj {}
        )*

        /// The two-operand expression kinds: arithmetic, comparisons and logic.
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
        pub enum BinOp {
            $(#[doc = $doc] $op,)*
        }

        impl BinOp {
            /// Every binary operator.
            pub const ALL: &'static [BinOp] = &[$(BinOp::$op),*];

            /// The node's type key, e.g. `"tir.Add"`.
            pub fn type_key(self) -> &'static str {
                match self { $(BinOp::$op => $key,)* }
            }

            /// The operator's text in the printer (`+`, `//`, `T.min`, ...).
            pub fn symbol(self) -> &'static str {
                match self { $(BinOp::$op => $sym,)* }
            }

            pub(crate) fn type_index(self) -> i32 {
                match self { $(BinOp::$op => <$obj as ObjectType>::type_index(),)* }
            }

            /// Builds the node without checks.
            pub(crate) fn make(self, dtype: DataType, a: PrimExpr, b: PrimExpr) -> PrimExpr {
                match self {
                    $(BinOp::$op => PrimExpr::from_node($obj { parent: PrimExprObj { dtype }, a, b }),)*
                }
            }

            /// The operands of a node of this kind.
            ///
            /// # Safety
            /// `e` must be a node of this operator's type.
            pub(crate) unsafe fn operands(self, e: &PrimExpr) -> (&PrimExpr, &PrimExpr) {
                match self {
                    $(BinOp::$op => {
                        // SAFETY: the caller guarantees `e` is a node of this operator's type.
                        let n: &$obj = unsafe { crate::node::payload(e.object()) };
                        (&n.a, &n.b)
                    })*
                }
            }
        }
    };
}

binary_nodes! {
    Add => AddObj, "tir.Add", "+", "Addition (`tir.Add`).";
    Sub => SubObj, "tir.Sub", "-", "Subtraction (`tir.Sub`).";
    Mul => MulObj, "tir.Mul", "*", "Multiplication (`tir.Mul`).";
    Div => DivObj, "tir.Div", "/", "Division (`tir.Div`): truncating for integers, as in C.";
    Mod => ModObj, "tir.Mod", "%", "Remainder of truncating division (`tir.Mod`), as C's `%`.";
    FloorDiv => FloorDivObj, "tir.FloorDiv", "//", "Division rounding toward negative infinity (`tir.FloorDiv`).";
    FloorMod => FloorModObj, "tir.FloorMod", "%", "Remainder of floor division, sign of the divisor (`tir.FloorMod`).";
    Min => MinObj, "tir.Min", "T.min", "The smaller operand (`tir.Min`).";
    Max => MaxObj, "tir.Max", "T.max", "The larger operand (`tir.Max`).";
    Eq => EQObj, "tir.EQ", "==", "Equality (`tir.EQ`), a bool.";
    Ne => NEObj, "tir.NE", "!=", "Inequality (`tir.NE`), a bool.";
    Lt => LTObj, "tir.LT", "<", "Less than (`tir.LT`), a bool.";
    Le => LEObj, "tir.LE", "<=", "Less or equal (`tir.LE`), a bool.";
    Gt => GTObj, "tir.GT", ">", "Greater than (`tir.GT`), a bool.";
    Ge => GEObj, "tir.GE", ">=", "Greater or equal (`tir.GE`), a bool.";
    And => AndObj, "tir.And", "and", "Logical and (`tir.And`) of bools.";
    Or => OrObj, "tir.Or", "or", "Logical or (`tir.Or`) of bools.";
}

impl BinOp {
    /// `+ - * / % // floormod min max`: result has the operands' dtype.
    pub fn is_arith(self) -> bool {
        !self.is_comparison() && !self.is_logical()
    }

    /// `== != < <= > >=`: result is bool.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }

    /// `and`, `or`.
    pub fn is_logical(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or)
    }

    /// `a op b == b op a`.
    pub fn is_commutative(self) -> bool {
        matches!(
            self,
            BinOp::Add
                | BinOp::Mul
                | BinOp::Min
                | BinOp::Max
                | BinOp::Eq
                | BinOp::Ne
                | BinOp::And
                | BinOp::Or
        )
    }

    /// The comparison with operands swapped (`a < b` is `b > a`).
    pub fn flip(self) -> BinOp {
        match self {
            BinOp::Lt => BinOp::Gt,
            BinOp::Le => BinOp::Ge,
            BinOp::Gt => BinOp::Lt,
            BinOp::Ge => BinOp::Le,
            other => other,
        }
    }

    /// The negated comparison (`not (a < b)` is `a >= b` on integers).
    pub fn negate(self) -> Option<BinOp> {
        Some(match self {
            BinOp::Eq => BinOp::Ne,
            BinOp::Ne => BinOp::Eq,
            BinOp::Lt => BinOp::Ge,
            BinOp::Le => BinOp::Gt,
            BinOp::Gt => BinOp::Le,
            BinOp::Ge => BinOp::Lt,
            _ => return None,
        })
    }

    /// The operator whose type key is `key`.
    pub fn from_type_key(key: &str) -> Option<BinOp> {
        BinOp::ALL.iter().copied().find(|op| op.type_key() == key)
    }
}
