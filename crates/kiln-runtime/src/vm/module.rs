//! The virtual machine as a module (kind `VirtualMachine`): the executor functions of
//! [`crate::executor`] (`set_input`, `run`, `get_output`, ...), one call at a time per machine.
//! The graph executor's `load_params`, `share_params` and `set_output_zero_copy` are there
//! too and say why they do not apply (a program's weights live in its segments). Its own:
//!
//! | function | arguments | result |
//! | --- | --- | --- |
//! | `set_step_limit` | n | None: a run stops with an error after n instructions (default 2^32) |

use super::machine::{VirtualMachine, KIND};
use crate::executor::{common_body, Body};
use crate::module::{Module, ModuleNode};
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{Error, Function, Result};
use std::sync::{Arc, Mutex, MutexGuard};

/// The module node of a virtual machine.
pub struct VirtualMachineModule {
    vm: Arc<Mutex<VirtualMachine>>,
}

impl VirtualMachineModule {
    /// Wraps a machine in a module.
    pub fn new_module(vm: VirtualMachine) -> Module {
        Module::new(VirtualMachineModule {
            vm: Arc::new(Mutex::new(vm)),
        })
    }

    /// The machine (locked: other calls on it wait).
    pub fn lock(&self) -> MutexGuard<'_, VirtualMachine> {
        self.vm.lock().recover()
    }
}

/// The functions only the VM has, and the graph executor's that do not apply.
fn own(name: &str) -> Option<Body<VirtualMachine>> {
    let f: Body<VirtualMachine> = match name {
        "load_params" | "share_params" => |_, _| {
            Err(Error::runtime_error(format!(
                "{KIND}: load_params and share_params do not apply; the weights are part of \
                 the program's compiled segments"
            )))
        },
        "set_step_limit" => |vm, a| {
            crate::executor::check_arity(KIND, "set_step_limit", "n", a, 1, 1)?;
            let n: i64 = a[0].try_as().map_err(|_| {
                crate::executor::arg_error(KIND, "set_step_limit", 0, "an int", &a[0])
            })?;
            let n = u64::try_from(n).map_err(|_| {
                Error::value_error(format!("{KIND}.set_step_limit: {n} is negative"))
            })?;
            crate::executor::lock(vm).set_step_limit(n);
            Ok(kiln_ffi::Any::none())
        },
        "set_output_zero_copy" => |_, _| {
            Err(Error::runtime_error(format!(
                "{KIND}.set_output_zero_copy: outputs are made by the run (their shapes may \
                 depend on the data); copy them with get_output(index, out)"
            )))
        },
        _ => return None,
    };
    Some(f)
}

impl ModuleNode for VirtualMachineModule {
    fn kind(&self) -> &str {
        KIND
    }

    fn get_function(&self, name: &str) -> Result<Option<Function>> {
        let vm = self.vm.clone();
        if let Some(f) = common_body(name) {
            return Ok(Some(Function::from_packed(move |args| f(&*vm, KIND, args))));
        }
        let Some(f) = own(name) else {
            return Ok(None);
        };
        Ok(Some(Function::from_packed(move |args| f(&vm, args))))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
