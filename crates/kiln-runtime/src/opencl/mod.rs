//! OpenCL device modules (seed 000's host/device split): the OpenCL C source of a program's
//! kernels with, for each kernel, what the host must pass to launch it ([`FunctionInfo`]).
//!
//! An [`OpenClModule`] is what `kiln.build(..., target="opencl")` imports into its host
//! module; `export_library` packs it into the host library's blob (kind `opencl`) and loading
//! restores it.

use kiln_ffi::{DataType, Function, Result};

use crate::module::{Module, ModuleNode};

/// One kernel of a device module: its name, the types of its arguments (`handle` for buffers)
/// and the launch parameters that follow them in a call, by thread tag (`blockIdx.x`,
/// `threadIdx.y`, ...), in call order (TVM's `FunctionInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    /// The kernel's name in the source (and the name the host looks it up by).
    pub name: String,
    /// The kernel's arguments, in order: `handle` for a buffer, else the scalar's type.
    pub arg_types: Vec<DataType>,
    /// The thread tags whose extents the host passes after the arguments.
    pub launch_param_tags: Vec<String>,
}

/// A program of OpenCL C kernels and the [`FunctionInfo`] of each.
pub struct OpenClModule {
    source: String,
    functions: Vec<FunctionInfo>,
}

impl OpenClModule {
    /// A module holding `source` (OpenCL C) whose kernels are `functions`.
    pub fn new(source: String, functions: Vec<FunctionInfo>) -> Module {
        Module::new(OpenClModule { source, functions })
    }

    /// The kernels and their launch information.
    pub fn functions(&self) -> &[FunctionInfo] {
        &self.functions
    }
}

impl ModuleNode for OpenClModule {
    fn kind(&self) -> &str {
        "opencl"
    }

    fn get_function(&self, _name: &str) -> Result<Option<Function>> {
        Ok(None)
    }

    fn inspect_source(&self, format: &str) -> Result<String> {
        Ok(match format {
            "" | "cl" | "opencl" => self.source.clone(),
            _ => String::new(),
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
