//! The client: [`connect`] opens a [`Session`] with a server (Kiln's or Apache TVM's); its
//! functions, modules, devices and tensors are used like local ones.

pub mod connection;
pub mod device;
pub mod module;

use crate::protocol::DEFAULT_MAX_PACKET_BYTES;
use connection::Connection;
use kiln_ffi::{Any, AnyView, Bytes, DataType, Device, Error, Function, Result};
use kiln_runtime::module::Module;
use kiln_runtime::tensor::Tensor;
use kiln_runtime::time_evaluator::TimeEvaluatorOptions;
use std::path::Path;
use std::sync::Arc;

/// An open session with a server.
#[derive(Clone)]
pub struct Session {
    conn: Arc<Connection>,
    module: Module,
}

/// Connects to the server at `host:port` with `key` (empty: none).
pub fn connect(host: &str, port: u16, key: &str) -> Result<Session> {
    let conn = Connection::open(host, port, key, DEFAULT_MAX_PACKET_BYTES)?;
    Ok(Session::from_connection(conn))
}

impl Session {
    pub(crate) fn from_connection(conn: Arc<Connection>) -> Session {
        let module = module::remote_module(&conn, None);
        Session { conn, module }
    }

    /// The session of a session module (kind `"rpc"` made by [`connect`] or `rpc.Connect`).
    pub fn from_module(m: &Module) -> Option<Session> {
        let n = m.downcast_node::<module::RpcModuleNode>()?;
        n.handle.is_none().then(|| Session {
            conn: n.conn.clone(),
            module: m.clone(),
        })
    }

    /// The session as a module: its functions are the server's globals.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The session index (encoded in remote devices).
    pub fn index(&self) -> usize {
        self.conn.index()
    }

    /// The remote global function `name`, or None.
    pub fn get_function(&self, name: &str) -> Result<Option<Function>> {
        self.conn.get_function(name)
    }

    /// The remote global function `name`, or an error naming it.
    pub fn function(&self, name: &str) -> Result<Function> {
        self.get_function(name)?.ok_or_else(|| {
            Error::attribute_error(format!("the RPC server has no function `{name}`"))
        })
    }

    fn call_helper(&self, name: &'static str, args: &[AnyView<'_>]) -> Result<Any> {
        module::call_helper(&self.conn, name, args)
    }

    /// Uploads `data` as the file `name` of the session folder.
    pub fn upload_bytes(&self, name: &str, data: &[u8]) -> Result<()> {
        let n = Any::from(name);
        let d = Any::from_bytes_slice(data);
        self.call_helper("tvm.rpc.server.upload", &[n.view(), d.view()])?;
        Ok(())
    }

    /// Uploads a local file (as `target`, default its file name).
    pub fn upload(&self, path: impl AsRef<Path>, target: Option<&str>) -> Result<()> {
        let path = path.as_ref();
        let data = std::fs::read(path)
            .map_err(|e| Error::value_error(format!("cannot read {}: {e}", path.display())))?;
        let name = match target {
            Some(t) => t.to_string(),
            None => path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .ok_or_else(|| Error::value_error("upload: the path has no file name"))?,
        };
        self.upload_bytes(&name, &data)
    }

    /// Downloads the file `name` of the session folder.
    pub fn download(&self, name: &str) -> Result<Vec<u8>> {
        let n = Any::from(name);
        let b: Bytes = self
            .call_helper("tvm.rpc.server.download", &[n.view()])?
            .try_as()?;
        Ok(b.as_bytes().to_vec())
    }

    /// Removes the file `name` of the session folder.
    pub fn remove(&self, name: &str) -> Result<()> {
        let n = Any::from(name);
        self.call_helper("tvm.rpc.server.remove", &[n.view()])?;
        Ok(())
    }

    /// Loads the uploaded library `name` on the server; its functions run there.
    pub fn load_module(&self, name: &str) -> Result<Module> {
        let n = Any::from(name);
        self.call_helper("tvm.rpc.server.load_module", &[n.view()])?
            .try_as()
    }

    /// The remote device `device_type:device_id`.
    pub fn device(&self, device_type: i32, device_id: i32) -> Result<Device> {
        device::remote_device(&self.conn, device_type, device_id)
    }

    /// The remote CPU `device_id`.
    pub fn cpu(&self, device_id: i32) -> Result<Device> {
        self.device(kiln_ffi::device::device_type::CPU, device_id)
    }

    /// An uninitialized tensor on a remote device of this session.
    pub fn empty(&self, shape: &[i64], dtype: DataType, dev: Device) -> Result<Tensor> {
        Tensor::empty(shape, dtype, dev)
    }

    /// A remote time evaluator of `name` (of `module`, or a remote global when None) on the
    /// remote device `dev`: it takes the function's arguments and returns TVM's bytes of
    /// `repeat` mean times in seconds.
    pub fn time_evaluator(
        &self,
        module: Option<&Module>,
        name: &str,
        dev: Device,
        options: &TimeEvaluatorOptions,
    ) -> Result<Function> {
        let args: Vec<Any> = vec![
            module.map_or_else(Any::none, |m| m.clone().into()),
            name.into(),
            (crate::protocol::strip_session_mask(dev.device_type()) as i64).into(),
            (dev.device_id() as i64).into(),
            (options.number as i64).into(),
            (options.repeat as i64).into(),
            (options.min_repeat_ms as i64).into(),
            (options.limit_zero_time_iterations as i64).into(),
            (options.cooldown_interval_ms as i64).into(),
            (options.repeats_to_cooldown as i64).into(),
            (options.cache_flush_bytes as i64).into(),
            "".into(),
        ];
        let views: Vec<AnyView<'_>> = args.iter().map(|a| a.view()).collect();
        self.call_helper("runtime.RPCTimeEvaluator", &views)?
            .try_as()
    }

    /// Ends the session (also done when the last reference goes).
    pub fn close(&self) {
        self.conn.shutdown();
    }
}
