//! Remote modules (kind `"rpc"`, as TVM's `RPCModule`): the session itself (functions are the
//! server's globals) or a module loaded on the server (functions found through
//! `tvm.rpc.server.ModuleGetFunction`).

use super::connection::{remote_function, Connection, RemoteHandle};
use kiln_ffi::{AnyView, Function, Result};
use kiln_runtime::module::{Module, ModuleNode};
use std::sync::Arc;

/// A module on the other side of a connection.
pub struct RpcModuleNode {
    /// The connection.
    pub conn: Arc<Connection>,
    /// The remote module; None for the session module.
    pub handle: Option<RemoteHandle>,
}

impl ModuleNode for RpcModuleNode {
    fn kind(&self) -> &str {
        "rpc"
    }

    fn get_function(&self, name: &str) -> Result<Option<Function>> {
        match &self.handle {
            None => self.conn.get_function(name),
            Some(h) => {
                let getter = self.conn.helper("tvm.rpc.server.ModuleGetFunction")?;
                let name_arg = kiln_ffi::Any::from(name);
                let module_arg = crate::codec::WireValue::Module(h.handle);
                let vals = self.conn.request(&crate::codec::encode_seq_packet(
                    crate::protocol::code::CALL_FUNC,
                    Some(getter),
                    &[
                        module_arg,
                        crate::codec::WireValue::Str(name.as_bytes().to_vec()),
                        crate::codec::WireValue::Bool(true),
                    ],
                ))?;
                drop(name_arg);
                let rv = self.conn.decode_return(vals)?;
                if rv.is_none() {
                    Ok(None)
                } else {
                    rv.try_as::<Function>().map(Some)
                }
            }
        }
    }

    fn property_mask(&self) -> i64 {
        kiln_runtime::module::PROPERTY_RUNNABLE
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The module `handle` of `conn` (None: the session module).
pub fn remote_module(conn: &Arc<Connection>, handle: Option<u64>) -> Module {
    Module::new(RpcModuleNode {
        conn: conn.clone(),
        handle: handle.map(|h| RemoteHandle::new(conn, h)),
    })
}

/// The connection of a remote module, if it is one.
pub fn connection_of(m: &Module) -> Option<Arc<Connection>> {
    m.downcast_node::<RpcModuleNode>().map(|n| n.conn.clone())
}

/// Calls the remote helper `name` with local arguments.
pub fn call_helper(
    conn: &Arc<Connection>,
    name: &'static str,
    args: &[AnyView<'_>],
) -> Result<kiln_ffi::Any> {
    let h = conn.helper(name)?;
    conn.call(h, args)
}

/// Wraps a remote function handle (used by the globals).
pub fn wrap_function(conn: &Arc<Connection>, handle: u64) -> Function {
    remote_function(conn, handle)
}
