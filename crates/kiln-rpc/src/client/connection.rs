//! The client's connection: one request at a time over the socket, remote handles that free
//! themselves, argument encoding and return decoding as TVM's `RPCWrappedFunc` does.

use crate::codec::{decode_packet, encode_seq_packet, Packet, WireTensor, WireValue, Writer};
use crate::protocol::{code, strip_session_mask, PROTOCOL_VERSION};
use crate::transport::{client_handshake, read_packet};
use kiln_ffi::abi::{type_index as ti, DLTensor};
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{Any, AnyView, DataType, Device, Error, Function, Result};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// One connection to a server.
pub struct Connection {
    stream: Mutex<TcpStream>,
    /// The session index (remote devices carry it in their device type), given on first use.
    index: std::sync::OnceLock<usize>,
    max_packet: u64,
    /// `host:port` of the server, for messages.
    pub peer: String,
    closed: AtomicBool,
    helpers: Mutex<HashMap<&'static str, u64>>,
}

fn io_err(peer: &str, e: impl std::fmt::Display) -> Error {
    Error::runtime_error(format!("RPC connection to {peer}: {e}"))
}

/// Turns a remote error message into an error, keeping its kind when it names one.
pub fn remote_error(msg: &str) -> Error {
    let last = msg
        .trim_end()
        .lines()
        .rev()
        .find(|l| l.contains(": "))
        .unwrap_or(msg);
    let kind = last
        .split_once(": ")
        .map(|(k, _)| k.trim())
        .filter(|k| {
            k.ends_with("Error") && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .unwrap_or("RPCError");
    let text = match msg.strip_prefix(&format!("{kind}: ")) {
        Some(rest) => rest.to_string(),
        None => msg.to_string(),
    };
    Error::new(kind, format!("error from the RPC server: {text}"))
}

impl Connection {
    /// Connects, shakes hands with `client:<key>` and initializes the remote session.
    pub fn open(host: &str, port: u16, key: &str, max_packet: u64) -> Result<Arc<Connection>> {
        let peer = format!("{host}:{port}");
        let mut stream = TcpStream::connect((host, port)).map_err(|e| io_err(&peer, e))?;
        stream.set_nodelay(true).map_err(|e| io_err(&peer, e))?;
        client_handshake(&mut stream, &format!("client:{key}"), &peer)?;
        let mut w = Writer::packet(code::INIT_SERVER);
        w.len_bytes(PROTOCOL_VERSION.as_bytes());
        w.seq(&[]);
        let conn = Arc::new(Connection {
            stream: Mutex::new(stream),
            index: std::sync::OnceLock::new(),
            max_packet,
            peer,
            closed: AtomicBool::new(false),
            helpers: Mutex::new(HashMap::new()),
        });
        conn.request(&w.finish())?;
        Ok(conn)
    }

    /// The session index, taking a free slot of the session table on first use.
    pub fn index(self: &Arc<Self>) -> usize {
        *self.index.get_or_init(|| super::device::register(self))
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, TcpStream>> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::runtime_error(format!(
                "the RPC session with {} is closed",
                self.peer
            )));
        }
        Ok(self.stream.lock().recover())
    }

    fn fail(&self, e: impl std::fmt::Display) -> Error {
        self.closed.store(true, Ordering::SeqCst);
        io_err(&self.peer, e)
    }

    /// Sends `parts` as one request and returns the reply body.
    fn exchange(&self, parts: &[&[u8]]) -> Result<Vec<u8>> {
        let mut s = self.lock()?;
        for p in parts {
            s.write_all(p).map_err(|e| self.fail(e))?;
        }
        match read_packet(&mut *s, self.max_packet) {
            Ok(Some(b)) => Ok(b),
            Ok(None) => Err(self.fail("the server closed the connection")),
            Err(e) => Err(self.fail(e.message())),
        }
    }

    /// Sends a request packet and returns the values of its `Return`.
    pub fn request(&self, packet: &[u8]) -> Result<Vec<WireValue>> {
        let body = self.exchange(&[packet])?;
        match decode_packet(&body).map_err(|e| self.fail(e))? {
            Packet::Return(v) => Ok(v),
            Packet::Exception(m) => Err(remote_error(&m)),
            other => Err(self.fail(format!("unexpected reply {other:?}"))),
        }
    }

    /// A system call; returns its one value.
    pub fn syscall(&self, c: i32, args: &[WireValue]) -> Result<WireValue> {
        let mut v = self.request(&encode_seq_packet(c, None, args))?;
        if v.len() != 1 {
            return Err(Error::runtime_error(
                "system call returned a wrong number of values",
            ));
        }
        Ok(v.remove(0))
    }

    /// Releases a handle the server gave (errors are ignored: the server frees everything at
    /// the end of the session anyway).
    pub fn free_handle(&self, h: u64) {
        if h != 0 && !self.closed.load(Ordering::SeqCst) {
            let _ = self.syscall(code::FREE_HANDLE, &[WireValue::OpaquePtr(h)]);
        }
    }

    /// The handle of the remote global `name` (0 when it does not exist).
    pub fn global_handle(&self, name: &str) -> Result<u64> {
        match self.syscall(
            code::GET_GLOBAL_FUNC,
            &[WireValue::Str(name.as_bytes().to_vec())],
        )? {
            WireValue::OpaquePtr(h) => Ok(h),
            WireValue::None => Ok(0),
            other => Err(Error::runtime_error(format!(
                "GetGlobalFunc returned {other:?}"
            ))),
        }
    }

    /// A cached handle of a remote helper function that must exist.
    pub fn helper(&self, name: &'static str) -> Result<u64> {
        if let Some(h) = self.helpers.lock().recover().get(name) {
            return Ok(*h);
        }
        let h = self.global_handle(name)?;
        if h == 0 {
            return Err(Error::runtime_error(format!(
                "the RPC server {} has no function `{name}`",
                self.peer
            )));
        }
        self.helpers.lock().recover().insert(name, h);
        Ok(h)
    }

    /// Calls the remote function `handle`.
    pub fn call(self: &Arc<Self>, handle: u64, args: &[AnyView<'_>]) -> Result<Any> {
        let wire = args
            .iter()
            .enumerate()
            .map(|(i, a)| {
                self.encode_arg(a)
                    .map_err(|e| e.context(format!("argument {i}")))
            })
            .collect::<Result<Vec<_>>>()?;
        let vals = self.request(&encode_seq_packet(code::CALL_FUNC, Some(handle), &wire))?;
        self.decode_return(vals)
    }

    /// The remote global `name` as a local function, or None.
    pub fn get_function(self: &Arc<Self>, name: &str) -> Result<Option<Function>> {
        let h = self.global_handle(name)?;
        Ok((h != 0).then(|| remote_function(self, h)))
    }

    /// Writes `data` into the remote tensor `t` from its byte offset on, in packets that fit
    /// the packet limit.
    pub fn copy_to_remote(&self, t: &WireTensor, data: &[u8]) -> Result<()> {
        let chunk = (self.max_packet - 1024).max(1) as usize;
        let mut t = t.clone();
        let base = t.byte_offset;
        for (i, piece) in data.chunks(chunk).enumerate() {
            t.byte_offset = base + (i * chunk) as u64;
            let mut w = Writer::default();
            w.u64(0);
            w.i32(code::COPY_TO_REMOTE);
            w.tensor(&t);
            w.u64(piece.len() as u64);
            let n = (w.buf.len() - 8 + piece.len()) as u64;
            w.buf[..8].copy_from_slice(&n.to_le_bytes());
            let body = self.exchange(&[&w.buf, piece])?;
            match decode_packet(&body).map_err(|e| self.fail(e))? {
                Packet::Return(_) => {}
                Packet::Exception(m) => return Err(remote_error(&m)),
                other => return Err(self.fail(format!("unexpected reply {other:?}"))),
            }
        }
        Ok(())
    }

    /// Reads the bytes of the remote tensor `t` from its byte offset on into `out`.
    pub fn copy_from_remote(&self, t: &WireTensor, out: &mut [u8]) -> Result<()> {
        let chunk = (self.max_packet - 1024).max(1) as usize;
        let mut t = t.clone();
        let base = t.byte_offset;
        for (i, piece) in out.chunks_mut(chunk).enumerate() {
            t.byte_offset = base + (i * chunk) as u64;
            let mut w = Writer::packet(code::COPY_FROM_REMOTE);
            w.tensor(&t);
            w.u64(piece.len() as u64);
            let packet = w.finish();
            let mut s = self.lock()?;
            s.write_all(&packet).map_err(|e| self.fail(e))?;
            let mut head = [0u8; 12];
            s.read_exact(&mut head).map_err(|e| self.fail(e))?;
            let n = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
            let c = i32::from_le_bytes(head[8..].try_into().unwrap_or_default());
            if c == code::COPY_ACK && n == 4 + piece.len() as u64 {
                s.read_exact(piece).map_err(|e| self.fail(e))?;
                continue;
            }
            if n < 4 || n > self.max_packet {
                return Err(self.fail(format!("bad reply of {n} bytes to a copy")));
            }
            let mut rest = vec![0u8; (n - 4) as usize];
            s.read_exact(&mut rest).map_err(|e| self.fail(e))?;
            drop(s);
            let mut body = c.to_le_bytes().to_vec();
            body.extend(rest);
            return match decode_packet(&body).map_err(|e| self.fail(e))? {
                Packet::Exception(m) => Err(remote_error(&m)),
                other => Err(self.fail(format!("unexpected reply {other:?}"))),
            };
        }
        Ok(())
    }

    fn encode_arg(self: &Arc<Self>, a: &AnyView<'_>) -> Result<WireValue> {
        match a.type_index() {
            ti::TENSOR | ti::DL_TENSOR_PTR => {
                // SAFETY: a tensor value points to a live DLTensor (24 bytes into a tensor object).
                let dl = unsafe {
                    if a.type_index() == ti::TENSOR {
                        &*((a.raw().value.v_obj as *const u8).add(24) as *const DLTensor)
                    } else {
                        &*(a.raw().value.v_ptr as *const DLTensor)
                    }
                };
                self.check_device(Device(dl.device))?;
                // SAFETY: the DLTensor is live for the call.
                unsafe { wire_tensor(dl) }
            }
            ti::DEVICE => {
                let d: Device = a.try_as()?;
                if d.device_type() >= crate::protocol::RPC_SESS_MASK {
                    self.check_device(d)?;
                }
                Ok(WireValue::Device(
                    Device::new(strip_session_mask(d.device_type()), d.device_id()).0,
                ))
            }
            ti::MODULE => {
                let m: kiln_runtime::module::Module = a.try_as()?;
                match m.downcast_node::<super::module::RpcModuleNode>() {
                    Some(n) if Arc::ptr_eq(&n.conn, self) => match &n.handle {
                        Some(h) => Ok(WireValue::Module(h.handle)),
                        None => Err(Error::value_error("a session cannot be passed to itself")),
                    },
                    _ => Err(Error::value_error(
                        "only modules of the same RPC session can be passed to a remote function",
                    )),
                }
            }
            ti::FUNCTION => match lookup_remote_function(a) {
                Some((c, h)) if Arc::ptr_eq(&c, self) => Ok(WireValue::Function(h)),
                _ => Err(Error::value_error(
                    "only functions of the same RPC session can be passed to a remote function",
                )),
            },
            ti::STR | ti::SMALL_STR | ti::RAW_STR => {
                Ok(WireValue::Str(a.str_bytes().unwrap_or(&[]).to_vec()))
            }
            ti::BYTES | ti::SMALL_BYTES | ti::BYTE_ARRAY_PTR => {
                Ok(WireValue::Bytes(a.bytes_bytes().unwrap_or(&[]).to_vec()))
            }
            _ => crate::server::to_wire_pod(&a.to_owned()),
        }
    }

    fn check_device(self: &Arc<Self>, d: Device) -> Result<()> {
        match crate::protocol::session_index_of(d.device_type()) {
            Some(i) if self.index.get() == Some(&i) => Ok(()),
            Some(_) => Err(Error::value_error(format!(
                "device type {} belongs to another RPC session",
                d.device_type()
            ))),
            None => Err(Error::value_error(format!(
                "a tensor on the local device {d} cannot be passed to a remote function: \
                 allocate it on the session's device"
            ))),
        }
    }

    /// Decodes a return as TVM's `WrapRemoteReturnToValue` does.
    pub fn decode_return(self: &Arc<Self>, vals: Vec<WireValue>) -> Result<Any> {
        let mut it = vals.into_iter();
        let index = match it.next() {
            Some(WireValue::Int(i)) => i as i32,
            other => {
                return Err(Error::runtime_error(format!(
                    "bad return encoding {other:?}"
                )))
            }
        };
        let value = it.next().unwrap_or(WireValue::None);
        let handle_of = |v: &WireValue| match v {
            WireValue::OpaquePtr(h) => Ok(*h),
            other => Err(Error::runtime_error(format!(
                "expected a handle, got {other:?}"
            ))),
        };
        match index {
            ti::NONE => Ok(Any::none()),
            ti::FUNCTION => Ok(remote_function(self, handle_of(&value)?).into()),
            ti::MODULE => Ok(super::module::remote_module(self, Some(handle_of(&value)?)).into()),
            ti::TENSOR | ti::DL_TENSOR_PTR => {
                let nd = handle_of(&it.next().unwrap_or(WireValue::None))?;
                let _guard = RemoteHandle {
                    conn: self.clone(),
                    handle: nd,
                    key: AtomicUsize::new(0),
                };
                match value {
                    WireValue::Tensor(t) => super::device::copy_returned_tensor(self, &t),
                    other => Err(Error::runtime_error(format!(
                        "expected a tensor, got {other:?}"
                    ))),
                }
            }
            i if i >= ti::STATIC_OBJECT_BEGIN && !matches!(i, ti::STR | ti::BYTES) => {
                self.free_handle(handle_of(&value)?);
                Err(Error::type_error(format!(
                    "the remote function returned an object of type {}, which Kiln's client cannot hold",
                    kiln_ffi::any::type_name_of_index(i)
                )))
            }
            _ => Ok(match value {
                WireValue::None => Any::none(),
                WireValue::Int(v) => v.into(),
                WireValue::Bool(b) => b.into(),
                WireValue::Float(f) => f.into(),
                WireValue::OpaquePtr(p) => (p as *mut std::ffi::c_void).into(),
                WireValue::DataType(t) => DataType(t).into(),
                WireValue::Device(d) => Device(d).into(),
                WireValue::Str(s) => Any::from_str_bytes(&s),
                WireValue::Bytes(b) => Any::from_bytes_slice(&b),
                other => return Err(Error::runtime_error(format!("unexpected return {other:?}"))),
            }),
        }
    }

    /// Tells the server the session is over.
    pub fn shutdown(&self) {
        if let Ok(mut s) = self.lock() {
            let w = Writer::packet(code::SHUTDOWN);
            let _ = s.write_all(&w.finish());
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The metadata of a local view of remote memory, as the server expects it.
///
/// # Safety
/// `dl` must describe a live tensor.
pub unsafe fn wire_tensor(dl: &DLTensor) -> Result<WireValue> {
    let shape: Vec<i64> = if dl.ndim > 0 {
        // SAFETY: the caller guarantees a live tensor, whose shape holds ndim extents.
        unsafe { std::slice::from_raw_parts(dl.shape, dl.ndim as usize) }.to_vec()
    } else {
        Vec::new()
    };
    if !dl.strides.is_null() && dl.ndim > 0 {
        // SAFETY: non-null strides of a live tensor hold ndim entries.
        let strides = unsafe { std::slice::from_raw_parts(dl.strides, dl.ndim as usize) };
        let mut expect = 1i64;
        for (s, d) in strides.iter().zip(&shape).rev() {
            if *d != 1 && *s != expect {
                return Err(Error::value_error("only compact tensors travel over RPC"));
            }
            expect *= d;
        }
    }
    Ok(WireValue::Tensor(WireTensor {
        data: dl.data as u64,
        device: Device::new(
            strip_session_mask(dl.device.device_type),
            dl.device.device_id,
        )
        .0,
        dtype: dl.dtype,
        shape,
        byte_offset: dl.byte_offset,
    }))
}

/// A handle the server gave; released when dropped.
pub struct RemoteHandle {
    /// The connection.
    pub conn: Arc<Connection>,
    /// The handle.
    pub handle: u64,
    key: AtomicUsize,
}

impl RemoteHandle {
    /// Wraps `handle` of `conn`.
    pub fn new(conn: &Arc<Connection>, handle: u64) -> Self {
        RemoteHandle {
            conn: conn.clone(),
            handle,
            key: AtomicUsize::new(0),
        }
    }
}

impl Drop for RemoteHandle {
    fn drop(&mut self) {
        let key = self.key.load(Ordering::SeqCst);
        if key != 0 {
            remote_functions().remove(&key);
        }
        self.conn.free_handle(self.handle);
    }
}

type FunctionTable = HashMap<usize, (Weak<Connection>, u64)>;

fn remote_functions() -> std::sync::MutexGuard<'static, FunctionTable> {
    static TABLE: std::sync::OnceLock<Mutex<FunctionTable>> = std::sync::OnceLock::new();
    TABLE.get_or_init(Default::default).lock().recover()
}

fn lookup_remote_function(a: &AnyView<'_>) -> Option<(Arc<Connection>, u64)> {
    let key = a.object_ptr()?.as_ptr() as usize;
    let (c, h) = remote_functions().get(&key).cloned()?;
    Some((c.upgrade()?, h))
}

/// A local function that calls the remote function `handle` (and frees it when dropped).
pub fn remote_function(conn: &Arc<Connection>, handle: u64) -> Function {
    let rh = Arc::new(RemoteHandle::new(conn, handle));
    let inner = rh.clone();
    let f = Function::from_packed(move |args| inner.conn.call(inner.handle, args));
    let key = f.0.as_ptr().as_ptr() as usize;
    rh.key.store(key, Ordering::SeqCst);
    remote_functions().insert(key, (Arc::downgrade(conn), handle));
    f
}
