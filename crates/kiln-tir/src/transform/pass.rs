//! The pass type every IR shares: a [`PassRef`] is a named module-to-module function with an
//! opt level (or a sequence of passes), generic over the IR through its object type, a
//! [`PassNode`]. Each IR declares its pass object once with [`declare_pass_node!`](crate::declare_pass_node)
//! (its own type key and module type) and names `PassRef<ItsPassObj>` its `Pass`.

use super::{PassBody, PassContext};
use kiln_ffi::{ObjectRef, ObjectType, Result};
use std::fmt;
use std::sync::Arc;

/// The FFI object behind a [`PassRef`]: a name, an opt level and a [`PassBody`] over modules of
/// type [`Module`](PassNode::Module). Declare one with
/// [`declare_pass_node!`](crate::declare_pass_node).
pub trait PassNode: ObjectType {
    /// The module type the pass rewrites.
    type Module: fmt::Display + 'static;

    /// Whether a failing pass names itself in its error (`in pass NAME`).
    const NAMES_ERRORS: bool;

    /// The object with these parts.
    fn from_parts(name: &str, opt_level: i64, body: PassBody<Self::Module, PassRef<Self>>) -> Self;

    /// The name (what the context's disabled list and printing use).
    fn name(&self) -> &str;

    /// Runs when the context's opt level is at least this.
    fn opt_level(&self) -> i64;

    /// What the pass does.
    fn body(&self) -> &PassBody<Self::Module, PassRef<Self>>;
}

/// A pass handle over the pass object `N` (each IR's `Pass`). Cheap to clone.
#[derive(kiln_ffi::ObjectRef)]
pub struct PassRef<N: PassNode>(pub ObjectRef<N>);

impl<N: PassNode> Clone for PassRef<N> {
    fn clone(&self) -> Self {
        PassRef(self.0.clone())
    }
}

impl<N: PassNode> PassRef<N> {
    /// A module pass running `f`.
    pub fn new(
        name: &str,
        opt_level: i64,
        f: impl Fn(N::Module, &PassContext) -> Result<N::Module> + Send + Sync + 'static,
    ) -> Self {
        let f: super::PassFn<N::Module> = if N::NAMES_ERRORS {
            let pass_name = name.to_string();
            Arc::new(move |m, ctx: &PassContext| {
                f(m, ctx).map_err(|e| e.context(format!("in pass {pass_name}")))
            })
        } else {
            Arc::new(f)
        };
        PassRef(ObjectRef::new(N::from_parts(
            name,
            opt_level,
            PassBody::Func(f),
        )))
    }

    /// Passes run in order as one pass (opt level 0: the members' levels decide).
    pub fn sequential(name: &str, passes: Vec<Self>) -> Self {
        PassRef(ObjectRef::new(N::from_parts(
            name,
            0,
            PassBody::Sequential(passes),
        )))
    }

    /// The name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The opt level.
    pub fn opt_level(&self) -> i64 {
        self.0.opt_level()
    }

    /// The passes of a sequential pass (empty for others).
    pub fn passes(&self) -> &[Self] {
        match self.0.body() {
            PassBody::Sequential(p) => p,
            _ => &[],
        }
    }

    /// Runs the pass on `module` if `ctx` enables it (else returns `module`), then prints the
    /// IR if asked. A sequential pass checks each of its passes.
    pub fn run(&self, module: N::Module, ctx: &PassContext) -> Result<N::Module> {
        self.0
            .body()
            .run(self.name(), self.opt_level(), module, ctx, |p, m, c| {
                p.run(m, c)
            })
    }

    /// Runs the pass with a default context.
    pub fn apply(&self, module: N::Module) -> Result<N::Module> {
        self.run(module, &PassContext::default())
    }
}

impl<N: PassNode> fmt::Debug for PassRef<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pass({}, opt_level={})", self.name(), self.opt_level())
    }
}

/// Declares an IR's pass object: `declare_pass_node!(PassObj, "type.key", Module, names_errors)`
/// defines `pub struct PassObj` (reflected fields `name` and `opt_level`) and its [`PassNode`]
/// impl, so that `PassRef<PassObj>` is that IR's pass. `names_errors` says whether a failing
/// pass names itself in its error.
#[macro_export]
macro_rules! declare_pass_node {
    ($name:ident, $key:tt, $module:ty, $names_errors:expr) => {
        #[doc = concat!("The pass node (`", $key, "`).")]
        #[derive(::kiln_ffi::Object)]
        #[object(type_key = $key)]
        #[repr(C)]
        pub struct $name {
            /// The name: what the context's disabled list and printing use.
            pub name: $crate::node::IrString,
            /// Runs when the context's opt level is at least this.
            pub opt_level: i64,
            /// What it does.
            #[object(skip)]
            pub body: $crate::transform::PassBody<$module, $crate::transform::PassRef<$name>>,
        }

        impl $crate::transform::PassNode for $name {
            type Module = $module;
            const NAMES_ERRORS: bool = $names_errors;

            fn from_parts(
                name: &str,
                opt_level: i64,
                body: $crate::transform::PassBody<$module, $crate::transform::PassRef<$name>>,
            ) -> Self {
                $name {
                    name: name.into(),
                    opt_level,
                    body,
                }
            }

            fn name(&self) -> &str {
                &self.name
            }

            fn opt_level(&self) -> i64 {
                self.opt_level
            }

            fn body(
                &self,
            ) -> &$crate::transform::PassBody<$module, $crate::transform::PassRef<$name>> {
                &self.body
            }
        }
    };
}
