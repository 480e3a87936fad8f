//! Statements (`Stmt`): loops, buffer stores, allocations, conditionals, lets, sequences,
//! attributes, asserts and evaluated expressions.
//!
//! Memory follows TVM's current form: `Allocate` reserves memory for a `handle` variable (with
//! element type, extents and storage scope) for the duration of its body; `DeclBuffer` declares a
//! [`Buffer`] view for its body. Buffers name their memory through their `data` variable, so a
//! `DeclBuffer` is optional for code generation; lowering emits it for readability and so that
//! passes can find every buffer a body uses.

use crate::buffer::Buffer;
use crate::dtype::DataTypeExt;
use crate::expr::{Operand, PrimExpr, Var};
use crate::node::{payload, upcast_ref, IrString, NodeList, TagTable};
use kiln_ffi::{
    Any, AnyView, DataType, Error, Map, Object, ObjectRef, ObjectType, Result, TryFromAny,
};
use std::fmt;
use std::sync::OnceLock;

/// The parent of every statement node (`tir.Stmt`).
#[derive(Object)]
#[object(type_key = "tir.Stmt")]
#[repr(C)]
pub struct StmtObj {}

/// A TIR statement. Cheap to clone. Printing shows TVMScript-like text.
#[derive(Clone, ObjectRef)]
#[object_ref(methods, debug_as_display, try_from_view = Stmt::from_view)]
pub struct Stmt(ObjectRef<StmtObj>);

/// How a loop runs.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ForKind {
    /// One iteration after the other.
    Serial = 0,
    /// Iterations spread over threads.
    Parallel = 1,
    /// Iterations become vector lanes.
    Vectorized = 2,
    /// The loop is unrolled.
    Unrolled = 3,
    /// Bound to a GPU thread axis.
    ThreadBinding = 4,
}

impl ForKind {
    /// The kind with TVM's number.
    pub fn from_i64(v: i64) -> Option<ForKind> {
        Some(match v {
            0 => ForKind::Serial,
            1 => ForKind::Parallel,
            2 => ForKind::Vectorized,
            3 => ForKind::Unrolled,
            4 => ForKind::ThreadBinding,
            _ => return None,
        })
    }

    /// The name TVMScript uses (`serial`, `parallel`, `vectorized`, `unroll`, `thread_binding`).
    pub fn name(self) -> &'static str {
        match self {
            ForKind::Serial => "serial",
            ForKind::Parallel => "parallel",
            ForKind::Vectorized => "vectorized",
            ForKind::Unrolled => "unroll",
            ForKind::ThreadBinding => "thread_binding",
        }
    }
}

impl From<ForKind> for Any {
    fn from(k: ForKind) -> Any {
        (k as i64).into()
    }
}

impl TryFromAny for ForKind {
    fn try_from_view(v: &AnyView<'_>) -> Option<Self> {
        ForKind::from_i64(i64::try_from_view(v)?)
    }
    fn type_name() -> String {
        "ForKind".into()
    }
}

/// `for loop_var in range(min, min + extent): body` (`tir.For`).
#[derive(Object)]
#[object(type_key = "tir.For", parent = StmtObj)]
#[repr(C)]
pub struct ForObj {
    /// The parent part (no fields).
    #[object(base)]
    pub parent: StmtObj,
    /// The loop variable (defined for the body).
    pub loop_var: Var,
    /// The first value.
    pub min: PrimExpr,
    /// The number of iterations.
    pub extent: PrimExpr,
    /// How the loop runs.
    pub kind: ForKind,
    /// The body.
    pub body: Stmt,
    /// Free-form annotations (`pragma_*`, unroll hints, ...).
    pub annotations: Map,
}

/// `buffer[indices] = value` (`tir.BufferStore`).
#[derive(Object)]
#[object(type_key = "tir.BufferStore", parent = StmtObj)]
#[repr(C)]
pub struct BufferStoreObj {
    /// The parent part (no fields).
    #[object(base)]
    pub parent: StmtObj,
    /// The buffer written.
    pub buffer: Buffer,
    /// The value stored.
    pub value: PrimExpr,
    /// One index per dimension.
    pub indices: NodeList<PrimExpr>,
}

/// Memory for `buffer_var` during `body` (`tir.Allocate`).
#[derive(Object)]
#[object(type_key = "tir.Allocate", parent = StmtObj)]
#[repr(C)]
pub struct AllocateObj {
    /// The parent part (no fields).
    #[object(base)]
    pub parent: StmtObj,
    /// The handle variable that points to the memory (defined for the body).
    pub buffer_var: Var,
    /// The element type.
    pub dtype: DataType,
    /// The extents (their product is the element count).
    pub extents: NodeList<PrimExpr>,
    /// Allocate only when true (usually `True`).
    pub condition: PrimExpr,
    /// The body.
    pub body: Stmt,
    /// Free-form annotations.
    pub annotations: Map,
    /// The storage scope (`"global"`, `"local"`, `"shared"`); TVM keeps it in the variable's
    /// pointer type, Kiln here.
    pub scope: IrString,
}

/// Declares `buffer` for `body` (`tir.DeclBuffer`).
#[derive(Object)]
#[object(type_key = "tir.DeclBuffer", parent = StmtObj)]
#[repr(C)]
pub struct DeclBufferObj {
    /// The parent part (no fields).
    #[object(base)]
    pub parent: StmtObj,
    /// The buffer declared.
    pub buffer: Buffer,
    /// The body.
    pub body: Stmt,
}

/// `if condition: then_case else: else_case` (`tir.IfThenElse`).
#[derive(Object)]
#[object(type_key = "tir.IfThenElse", parent = StmtObj)]
#[repr(C)]
pub struct IfThenElseObj {
    /// The parent part (no fields).
    #[object(base)]
    pub parent: StmtObj,
    /// The bool condition.
    pub condition: PrimExpr,
    /// Run when true.
    pub then_case: Stmt,
    /// Run when false, if any.
    pub else_case: Option<Stmt>,
}

/// `var = value` for `body` (`tir.LetStmt`).
#[derive(Object)]
#[object(type_key = "tir.LetStmt", parent = StmtObj)]
#[repr(C)]
pub struct LetStmtObj {
    /// The parent part (no fields).
    #[object(base)]
    pub parent: StmtObj,
    /// The bound variable.
    pub var: Var,
    /// Its value.
    pub value: PrimExpr,
    /// The body.
    pub body: Stmt,
}

/// Statements in order (`tir.SeqStmt`).
#[derive(Object)]
#[object(type_key = "tir.SeqStmt", parent = StmtObj)]
#[repr(C)]
pub struct SeqStmtObj {
    /// The parent part (no fields).
    #[object(base)]
    pub parent: StmtObj,
    /// The statements.
    pub seq: NodeList<Stmt>,
}

/// An attribute `attr_key = value` about `node`, in effect for `body` (`tir.AttrStmt`): thread
/// extents, pragmas, storage alignment, ...
#[derive(Object)]
#[object(type_key = "tir.AttrStmt", parent = StmtObj)]
#[repr(C)]
pub struct AttrStmtObj {
    /// The parent part (no fields).
    #[object(base)]
    pub parent: StmtObj,
    /// What the attribute is about (a variable, a buffer, a string, ...).
    pub node: Any,
    /// The attribute name.
    pub attr_key: IrString,
    /// The attribute value.
    pub value: PrimExpr,
    /// The body.
    pub body: Stmt,
}

/// `assert condition, message` before `body` (`tir.AssertStmt`).
#[derive(Object)]
#[object(type_key = "tir.AssertStmt", parent = StmtObj)]
#[repr(C)]
pub struct AssertStmtObj {
    /// The parent part (no fields).
    #[object(base)]
    pub parent: StmtObj,
    /// The bool condition.
    pub condition: PrimExpr,
    /// The message (usually a string constant).
    pub message: PrimExpr,
    /// The body.
    pub body: Stmt,
}

/// Evaluates an expression for its effect, e.g. a call (`tir.Evaluate`).
#[derive(Object)]
#[object(type_key = "tir.Evaluate", parent = StmtObj)]
#[repr(C)]
pub struct EvaluateObj {
    /// The parent part (no fields).
    #[object(base)]
    pub parent: StmtObj,
    /// The expression.
    pub value: PrimExpr,
}

/// Marks a node type whose payload starts with [`StmtObj`]; implemented by the statement node
/// types of this module (build one directly and wrap it with [`Stmt::from_node`]).
///
/// # Safety
/// The type must be `#[repr(C)]` with `StmtObj` as first field.
pub unsafe trait StmtNode: ObjectType {}

macro_rules! stmt_nodes {
    ($($variant:ident => $obj:ident,)*) => {
        $(
            // SAFETY: every statement node is #[repr(C)] with StmtObj first.
            unsafe impl StmtNode for $obj {}
        )*

        /// What a statement is, with borrowed access to its node.
        #[derive(Clone, Copy)]
        pub enum StmtKind<'a> {
            $(
                #[doc = concat!("A `", stringify!($variant), "` node.")]
                $variant(&'a $obj),
            )*
        }

        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        enum StmtTag { $($variant,)* }

        fn stmt_table() -> &'static TagTable<StmtTag> {
            static TABLE: OnceLock<TagTable<StmtTag>> = OnceLock::new();
            TABLE.get_or_init(|| TagTable::build(vec![$(($obj::type_index(), StmtTag::$variant),)*]))
        }

        impl Stmt {
            /// What this statement is.
            pub fn kind(&self) -> StmtKind<'_> {
                let tag = stmt_table()
                    .get(self.0.type_index())
                    .expect("a Stmt handle holds a concrete node");
                // SAFETY: the tag (from the type index) names the payload type.
                unsafe {
                    match tag {
                        $(StmtTag::$variant => StmtKind::$variant(payload::<$obj, _>(&self.0)),)*
                    }
                }
            }

            /// The node's type key (`"tir.For"`, ...).
            pub fn type_key(&self) -> &'static str {
                match self.kind() {
                    $(StmtKind::$variant(_) => $obj::TYPE_KEY,)*
                }
            }
        }
    };
}

stmt_nodes! {
    For => ForObj,
    BufferStore => BufferStoreObj,
    Allocate => AllocateObj,
    DeclBuffer => DeclBufferObj,
    IfThenElse => IfThenElseObj,
    LetStmt => LetStmtObj,
    Seq => SeqStmtObj,
    AttrStmt => AttrStmtObj,
    Assert => AssertStmtObj,
    Evaluate => EvaluateObj,
}

fn check_bool(what: &str, e: &PrimExpr) -> Result<()> {
    if e.dtype() != DataType::bool() {
        return Err(Error::type_error(format!(
            "{what} needs a scalar bool condition, got {e} of type {}",
            e.dtype()
        )));
    }
    Ok(())
}

impl Stmt {
    /// Wraps a node built field by field (no checks): for passes that rebuild nodes.
    pub fn from_node<T: StmtNode>(node: T) -> Stmt {
        // SAFETY: StmtNode types start with StmtObj.
        Stmt(unsafe { upcast_ref(ObjectRef::new(node)) })
    }

    /// The handle for an object, if it is a concrete statement node.
    pub fn from_object(obj: ObjectRef<kiln_ffi::Object>) -> Option<Stmt> {
        stmt_table().get(obj.type_index())?;
        // SAFETY: every concrete statement node starts with StmtObj.
        Some(Stmt(unsafe { upcast_ref(obj) }))
    }

    /// The statement in a value, if it is a statement object (the `TryFromAny` downcast).
    fn from_view(v: &AnyView<'_>) -> Option<Stmt> {
        ObjectRef::<kiln_ffi::Object>::try_from_view(v).and_then(Stmt::from_object)
    }

    /// A loop; `min` and `extent` take the loop variable's type (literals adapt).
    pub fn try_for(
        loop_var: Var,
        min: impl Into<Operand>,
        extent: impl Into<Operand>,
        kind: ForKind,
        body: Stmt,
        annotations: Map,
    ) -> Result<Stmt> {
        let t = loop_var.dtype();
        if !t.is_integer() || t.is_vector() {
            return Err(Error::type_error(format!(
                "tir.For: loop variable `{}` must be a scalar integer, got {t}",
                loop_var.name()
            )));
        }
        let min = min.into().into_expr_of(t)?;
        let extent = extent.into().into_expr_of(t)?;
        for (what, e) in [("min", &min), ("extent", &extent)] {
            if e.dtype() != t {
                return Err(Error::type_error(format!(
                    "tir.For `{}`: {what} {e} has type {} but the loop variable {t}",
                    loop_var.name(),
                    e.dtype()
                )));
            }
        }
        Ok(Stmt::from_node(ForObj {
            parent: StmtObj {},
            loop_var,
            min,
            extent,
            kind,
            body,
            annotations,
        }))
    }

    /// A serial, parallel, vectorized or unrolled loop without annotations.
    ///
    /// # Panics
    /// On types that do not match (see [`Stmt::try_for`]).
    pub fn for_loop(
        loop_var: &Var,
        min: impl Into<Operand>,
        extent: impl Into<Operand>,
        kind: ForKind,
        body: Stmt,
    ) -> Stmt {
        Stmt::try_for(
            loop_var.clone(),
            min,
            extent,
            kind,
            body,
            Map::new(Vec::new()),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// `buffer[indices] = value`, checking indices and that the value has the buffer's element
    /// type (with the last index's lanes); literals adapt.
    pub fn try_buffer_store(
        buffer: Buffer,
        value: impl Into<Operand>,
        indices: Vec<PrimExpr>,
    ) -> Result<Stmt> {
        buffer.check_indices("tir.BufferStore", &indices)?;
        let lanes = indices.last().map(|i| i.dtype().lanes()).unwrap_or(1);
        let want = buffer.dtype().with_lanes(buffer.dtype().lanes() * lanes);
        let value = value.into().into_expr_of(want)?;
        if value.dtype() != want {
            return Err(Error::type_error(format!(
                "tir.BufferStore to `{}`: value {value} has type {} but the buffer holds {want}",
                buffer.name(),
                value.dtype()
            )));
        }
        Ok(Stmt::buffer_store_raw(buffer, value, indices))
    }

    /// A store without checks.
    pub fn buffer_store_raw(buffer: Buffer, value: PrimExpr, indices: Vec<PrimExpr>) -> Stmt {
        Stmt::from_node(BufferStoreObj {
            parent: StmtObj {},
            buffer,
            value,
            indices: indices.into(),
        })
    }

    /// An allocation of `extents` elements of `dtype` in `scope`, pointed to by `buffer_var`.
    pub fn try_allocate(
        buffer_var: Var,
        dtype: DataType,
        extents: Vec<PrimExpr>,
        condition: PrimExpr,
        body: Stmt,
        annotations: Map,
        scope: &str,
    ) -> Result<Stmt> {
        if !buffer_var.dtype().is_handle() {
            return Err(Error::type_error(format!(
                "tir.Allocate: `{}` must be a handle variable, got {}",
                buffer_var.name(),
                buffer_var.dtype()
            )));
        }
        check_bool("tir.Allocate", &condition)?;
        if let Some(bad) = extents.iter().find(|e| !e.dtype().is_integer()) {
            return Err(Error::type_error(format!(
                "tir.Allocate `{}`: extents must be integers, got {bad}",
                buffer_var.name()
            )));
        }
        Ok(Stmt::from_node(AllocateObj {
            parent: StmtObj {},
            buffer_var,
            dtype,
            extents: extents.into(),
            condition,
            body,
            annotations,
            scope: scope.into(),
        }))
    }

    /// Memory for `buffer` (its data variable, element type, shape and scope), with the buffer
    /// declared for `body`: `Allocate(DeclBuffer(body))`.
    pub fn allocate_buffer(buffer: &Buffer, body: Stmt) -> Stmt {
        let decl = Stmt::decl_buffer(buffer.clone(), body);
        Stmt::try_allocate(
            buffer.data().clone(),
            buffer.dtype(),
            buffer.shape().to_vec(),
            PrimExpr::bool(true),
            decl,
            Map::new(Vec::new()),
            buffer.scope(),
        )
        .expect("a buffer's fields make a valid allocation")
    }

    /// Declares `buffer` for `body`.
    pub fn decl_buffer(buffer: Buffer, body: Stmt) -> Stmt {
        Stmt::from_node(DeclBufferObj {
            parent: StmtObj {},
            buffer,
            body,
        })
    }

    /// `if condition: then_case else: else_case`.
    pub fn try_if_then_else(
        condition: PrimExpr,
        then_case: Stmt,
        else_case: Option<Stmt>,
    ) -> Result<Stmt> {
        check_bool("tir.IfThenElse", &condition)?;
        Ok(Stmt::if_then_else_raw(condition, then_case, else_case))
    }

    /// A conditional without checks.
    pub fn if_then_else_raw(condition: PrimExpr, then_case: Stmt, else_case: Option<Stmt>) -> Stmt {
        Stmt::from_node(IfThenElseObj {
            parent: StmtObj {},
            condition,
            then_case,
            else_case,
        })
    }

    /// `if condition: then_case else: else_case`.
    ///
    /// # Panics
    /// When the condition is not a scalar bool.
    pub fn if_then_else(condition: PrimExpr, then_case: Stmt, else_case: Option<Stmt>) -> Stmt {
        Stmt::try_if_then_else(condition, then_case, else_case).unwrap_or_else(|e| panic!("{e}"))
    }

    /// `var = value` for `body`; `value` takes `var`'s type (literals adapt).
    pub fn try_let(var: Var, value: impl Into<Operand>, body: Stmt) -> Result<Stmt> {
        let value = value.into().into_expr_of(var.dtype())?;
        if value.dtype() != var.dtype() {
            return Err(Error::type_error(format!(
                "tir.LetStmt `{}`: value {value} has type {} but the variable {}",
                var.name(),
                value.dtype(),
                var.dtype()
            )));
        }
        Ok(Stmt::from_node(LetStmtObj {
            parent: StmtObj {},
            var,
            value,
            body,
        }))
    }

    /// `var = value` for `body`.
    ///
    /// # Panics
    /// When the value's type is not the variable's.
    pub fn let_stmt(var: &Var, value: impl Into<Operand>, body: Stmt) -> Stmt {
        Stmt::try_let(var.clone(), value, body).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A sequence node exactly as given (no flattening).
    pub fn seq_raw(seq: Vec<Stmt>) -> Stmt {
        Stmt::from_node(SeqStmtObj {
            parent: StmtObj {},
            seq: seq.into(),
        })
    }

    /// The statements in order, as TVM's `SeqStmt::Flatten`: nested sequences are spliced and
    /// no-ops dropped; one statement is returned as itself, none as a no-op.
    pub fn seq(stmts: Vec<Stmt>) -> Stmt {
        let mut flat = Vec::with_capacity(stmts.len());
        fn push(flat: &mut Vec<Stmt>, s: Stmt) {
            match s.kind() {
                StmtKind::Seq(q) => q.seq.iter().for_each(|x| push(flat, x.clone())),
                _ if s.is_no_op() => {}
                _ => flat.push(s),
            }
        }
        for s in stmts {
            push(&mut flat, s);
        }
        match flat.len() {
            0 => Stmt::no_op(),
            1 => flat.pop().unwrap(),
            _ => Stmt::seq_raw(flat),
        }
    }

    /// An attribute `attr_key = value` about `node` for `body`.
    pub fn attr(
        node: impl Into<Any>,
        attr_key: &str,
        value: impl Into<Operand>,
        body: Stmt,
    ) -> Stmt {
        Stmt::from_node(AttrStmtObj {
            parent: StmtObj {},
            node: node.into(),
            attr_key: attr_key.into(),
            value: value.into().into_expr(),
            body,
        })
    }

    /// `assert condition, message` then `body`.
    pub fn try_assert(condition: PrimExpr, message: PrimExpr, body: Stmt) -> Result<Stmt> {
        check_bool("tir.AssertStmt", &condition)?;
        Ok(Stmt::from_node(AssertStmtObj {
            parent: StmtObj {},
            condition,
            message,
            body,
        }))
    }

    /// `assert condition, "message"` then `body`.
    ///
    /// # Panics
    /// When the condition is not a scalar bool.
    pub fn assert(condition: PrimExpr, message: &str, body: Stmt) -> Stmt {
        Stmt::try_assert(condition, PrimExpr::string(message), body)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Evaluates `value` for its effect.
    pub fn evaluate(value: impl Into<Operand>) -> Stmt {
        Stmt::from_node(EvaluateObj {
            parent: StmtObj {},
            value: value.into().into_expr(),
        })
    }

    /// The statement that does nothing: `Evaluate(0)`.
    pub fn no_op() -> Stmt {
        Stmt::evaluate(PrimExpr::i32(0))
    }

    /// True for `Evaluate(<constant>)` and empty sequences.
    pub fn is_no_op(&self) -> bool {
        match self.kind() {
            StmtKind::Evaluate(e) => e.value.is_const(),
            StmtKind::Seq(s) => s.seq.is_empty(),
            _ => false,
        }
    }
}

impl fmt::Display for Stmt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::printer::stmt_to_text(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_flattens_and_drops_no_ops() {
        let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(4)]);
        let s1 = a.store(1.0, vec![PrimExpr::i32(0)]);
        let s2 = a.store(2.0, vec![PrimExpr::i32(1)]);
        let nested = Stmt::seq(vec![
            s1.clone(),
            Stmt::seq_raw(vec![Stmt::no_op(), s2.clone()]),
        ]);
        match nested.kind() {
            StmtKind::Seq(s) => {
                assert_eq!(s.seq.len(), 2);
                assert!(s.seq[1].same_as(&s2));
            }
            _ => panic!("expected a sequence"),
        }
        assert!(Stmt::seq(vec![s1.clone()]).same_as(&s1));
        assert!(Stmt::seq(vec![]).is_no_op());
    }

    #[test]
    fn constructors_check_types() {
        let i = Var::int32("i");
        let a = Buffer::decl("A", DataType::float(32), vec![PrimExpr::i32(4)]);
        let e = Stmt::try_buffer_store(a.clone(), PrimExpr::i32(1) + &i, vec![i.to_expr()])
            .unwrap_err();
        assert!(e.message().contains("holds float32"), "{}", e.message());
        let e = Stmt::try_buffer_store(a.clone(), 1.0, vec![]).unwrap_err();
        assert!(e.message().contains("0 indices for 1 dimensions"));
        let e = Stmt::try_for(
            i.clone(),
            0,
            Var::new("n", DataType::int(64)),
            ForKind::Serial,
            Stmt::no_op(),
            Map::new(vec![]),
        )
        .unwrap_err();
        assert!(e.message().contains("extent"), "{}", e.message());
        assert!(Stmt::try_if_then_else(i.to_expr(), Stmt::no_op(), None).is_err());
    }
}
