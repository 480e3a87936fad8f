//! The graph module (`graph.IRModule`): named functions, `main` first.

use super::expr::Function;
use kiln_ffi::{Error, Object, ObjectRef, Result};
use kiln_tir::node::IrString;
use kiln_tir::NodeMap;
use std::fmt;

/// The module node.
#[derive(Object)]
#[object(type_key = "graph.IRModule")]
#[repr(C)]
pub struct IRModuleObj {
    /// Global name -> function.
    pub functions: NodeMap<IrString, Function>,
}

/// A module handle. Cheap to clone; passes return new modules.
#[derive(Clone, ObjectRef)]
pub struct IRModule(pub ObjectRef<IRModuleObj>);

impl IRModule {
    /// A module whose `main` is `f`.
    pub fn from_main(f: Function) -> IRModule {
        IRModule(ObjectRef::new(IRModuleObj {
            functions: NodeMap::new(vec![("main".into(), f)]),
        }))
    }

    /// The `main` function.
    pub fn main(&self) -> Result<Function> {
        self.get("main")
    }

    /// The function called `name`.
    pub fn get(&self, name: &str) -> Result<Function> {
        self.0
            .functions
            .get(name)
            .cloned()
            .ok_or_else(|| Error::key_error(format!("the module has no function `{name}`")))
    }

    /// The functions in order.
    pub fn functions(&self) -> &[(IrString, Function)] {
        self.0.functions.entries()
    }

    /// A copy with `name` set to `f`.
    pub fn with_function(&self, name: &str, f: Function) -> IRModule {
        IRModule(ObjectRef::new(IRModuleObj {
            functions: self.0.functions.insert(name.into(), f),
        }))
    }

    /// A copy holding only the functions that `keep` accepts.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) -> IRModule {
        IRModule(ObjectRef::new(IRModuleObj {
            functions: self
                .functions()
                .iter()
                .filter(|(n, _)| keep(n))
                .cloned()
                .collect(),
        }))
    }
}

impl fmt::Display for IRModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, func) in self.functions() {
            writeln!(
                f,
                "def @{name}{}",
                &super::printer::print_function(func)[3..]
            )?;
        }
        Ok(())
    }
}
