//! One served connection: the objects and memory handed to the client, and the dispatch of
//! each packet. Everything the client may name (function, module and tensor handles, data
//! pointers) is looked up in this session's tables before use, so a client can only reach
//! what it was given; dropping the session releases all of it.

use super::env::session_functions;
use crate::codec::{
    decode_packet, encode_exception, encode_seq_packet, Packet, WireTensor, WireValue,
};
use crate::protocol::{code, PROTOCOL_VERSION};
use crate::transport::read_packet;
use kiln_ffi::abi::{type_index as ti, DLTensor};
use kiln_ffi::{Any, AnyView, DataType, Device, Error, Function, Result};
use kiln_runtime::device::{copy_between, device_api, find_device_api, DeviceAttr};
use kiln_runtime::tensor::Tensor;
use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Why a session ended.
#[derive(Debug)]
pub enum SessionEnd {
    /// The client sent `Shutdown` or closed the connection between packets.
    Clean,
    /// A malformed packet or an I/O error.
    Failed(Error),
}

struct Allocation {
    device: Device,
    size: u64,
}

/// Device bytes that sessions of this process hold for their clients.
static HELD_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Device memory (bytes) held for clients by every session of this process: what a server's
/// sessions allocated and their clients have not freed yet. Zero once all sessions ended.
pub fn held_device_bytes() -> u64 {
    HELD_BYTES.load(std::sync::atomic::Ordering::SeqCst)
}

/// The state of one served connection.
pub struct ServerSession {
    /// Objects given to the client, by address, with how many times each was given.
    handles: HashMap<u64, (Any, u64)>,
    /// Device memory allocated for the client, by address.
    allocs: BTreeMap<u64, Allocation>,
    /// The functions bound to this session's folder.
    local: HashMap<String, Function>,
    initialized: bool,
    max_packet: u64,
    dir: PathBuf,
}

/// Owned argument storage for one call: values plus the tensors they point to.
struct CallArgs {
    values: Vec<Any>,
    _tensors: Vec<(Box<DLTensor>, Vec<i64>)>,
}

fn opaque(p: u64) -> WireValue {
    WireValue::OpaquePtr(p)
}

impl ServerSession {
    /// A session whose files live in `dir` (which the caller creates and removes).
    pub fn new(dir: &Path, max_packet: u64) -> Self {
        ServerSession {
            handles: HashMap::new(),
            allocs: BTreeMap::new(),
            local: session_functions(dir),
            initialized: false,
            max_packet,
            dir: dir.to_path_buf(),
        }
    }

    /// The session folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Serves packets from `stream` until the client leaves or sends something malformed.
    pub fn serve(&mut self, stream: &mut (impl Read + Write)) -> SessionEnd {
        loop {
            let body = match read_packet(stream, self.max_packet) {
                Ok(Some(b)) => b,
                Ok(None) => return SessionEnd::Clean,
                Err(e) => return SessionEnd::Failed(e),
            };
            let packet = match decode_packet(&body) {
                Ok(p) => p,
                Err(e) => {
                    // Tell the client why, then end: the stream can no longer be trusted.
                    let _ = stream.write_all(&encode_exception(&e.to_string()));
                    return SessionEnd::Failed(e.into());
                }
            };
            if let Packet::Shutdown = packet {
                return SessionEnd::Clean;
            }
            let out = self.handle(packet, stream);
            if let Err(e) = out.and_then(|_| stream.flush().map_err(io_err)) {
                return SessionEnd::Failed(e);
            }
        }
    }

    /// Handles one packet; an error from the work is answered as an exception, an error of
    /// the stream is returned.
    fn handle(&mut self, packet: Packet<'_>, stream: &mut impl Write) -> Result<()> {
        if let Packet::CopyFromRemote { tensor, nbytes } = &packet {
            let mut staged = Vec::new();
            let read = if kiln_runtime::device::is_host(Device(tensor.device)) {
                host_region(self, tensor, *nbytes)
            } else {
                staged = vec![0u8; *nbytes as usize];
                self.device_copy(tensor, staged.as_mut_ptr(), *nbytes, false)
                    .map(|_| staged.as_ptr() as u64)
            };
            return match read {
                Ok(ptr) => {
                    let mut head = Vec::with_capacity(12);
                    head.extend_from_slice(&(4 + *nbytes).to_le_bytes());
                    head.extend_from_slice(&code::COPY_ACK.to_le_bytes());
                    stream.write_all(&head).map_err(io_err)?;
                    // SAFETY: `region` checked that the bytes lie in memory this session owns,
                    // or they were just staged from the device into `staged`.
                    let data =
                        unsafe { std::slice::from_raw_parts(ptr as *const u8, *nbytes as usize) };
                    let out = stream.write_all(data).map_err(io_err);
                    drop(staged);
                    out
                }
                Err(e) => stream.write_all(&exception_packet(&e)).map_err(io_err),
            };
        }
        let reply = match self.dispatch(packet) {
            Ok(values) => encode_seq_packet(code::RETURN, None, &values),
            Err(e) => exception_packet(&e),
        };
        stream.write_all(&reply).map_err(io_err)
    }

    fn dispatch(&mut self, packet: Packet<'_>) -> Result<Vec<WireValue>> {
        match packet {
            Packet::InitServer { version, args } => {
                if self.initialized {
                    return Err(Error::runtime_error("the session is already initialized"));
                }
                if version != PROTOCOL_VERSION {
                    return Err(Error::runtime_error(format!(
                        "client protocol version {version} does not match the server's {PROTOCOL_VERSION}"
                    )));
                }
                if !args.is_empty() {
                    return Err(Error::runtime_error(
                        "this server only hosts the local session (no session constructor)",
                    ));
                }
                self.initialized = true;
                Ok(vec![WireValue::None])
            }
            _ if !self.initialized => Err(Error::runtime_error(
                "the session must be initialized (InitServer) first",
            )),
            Packet::CallFunc { handle, args } => {
                let f: Function = self.object(handle)?.try_as()?;
                let call = self.arguments(&args)?;
                let views: Vec<AnyView<'_>> = call.values.iter().map(|a| a.view()).collect();
                let rv = f.call(&views)?;
                drop(views);
                drop(call);
                self.encode_return(rv)
            }
            Packet::CopyToRemote { tensor, data }
                if !kiln_runtime::device::is_host(Device(tensor.device)) =>
            {
                let n = data.len() as u64;
                self.device_copy(&tensor, data.as_ptr() as *mut u8, n, true)?;
                Ok(vec![WireValue::None])
            }
            Packet::CopyToRemote { tensor, data } => {
                let ptr = host_region(self, &tensor, data.len() as u64)?;
                // SAFETY: `region` checked the destination; the source is the packet.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr as *mut u8, data.len()) };
                Ok(vec![WireValue::None])
            }
            Packet::Syscall { code, args } => Ok(vec![self.syscall(code, &args)?]),
            Packet::Return(_) | Packet::Exception(_) | Packet::CopyAck(_) => Err(
                Error::runtime_error("unexpected reply packet: the server makes no calls"),
            ),
            Packet::CopyFromRemote { .. } | Packet::Shutdown => unreachable!("handled before"),
        }
    }

    fn syscall(&mut self, c: i32, args: &[WireValue]) -> Result<WireValue> {
        let arg = |i: usize| {
            args.get(i)
                .ok_or_else(|| Error::type_error(format!("system call {c}: missing argument {i}")))
        };
        let device = |i: usize| match arg(i)? {
            WireValue::Device(d) => Ok(Device(*d)),
            other => Err(Error::type_error(format!(
                "expected a device, got {other:?}"
            ))),
        };
        let int = |i: usize| match arg(i)? {
            WireValue::Int(v) => Ok(*v),
            WireValue::Bool(b) => Ok(*b as i64),
            other => Err(Error::type_error(format!("expected an int, got {other:?}"))),
        };
        let ptr = |i: usize| match arg(i)? {
            WireValue::OpaquePtr(p) => Ok(*p),
            WireValue::None => Ok(0),
            other => Err(Error::type_error(format!(
                "expected a handle, got {other:?}"
            ))),
        };
        let no_stream = |i: usize| -> Result<()> {
            match ptr(i)? {
                0 => Ok(()),
                _ => Err(Error::value_error(
                    "only the default stream (NULL) is supported",
                )),
            }
        };
        match c {
            code::GET_GLOBAL_FUNC => {
                let name = match arg(0)? {
                    WireValue::Str(s) => String::from_utf8_lossy(s).into_owned(),
                    other => {
                        return Err(Error::type_error(format!("expected a name, got {other:?}")))
                    }
                };
                let f = self
                    .local
                    .get(&name)
                    .cloned()
                    .or_else(|| kiln_ffi::registry::get(&name));
                Ok(opaque(match f {
                    Some(f) => self.give(f.into()),
                    None => 0,
                }))
            }
            code::FREE_HANDLE => {
                let h = ptr(0)?;
                match self.handles.get_mut(&h) {
                    Some((_, n)) if *n > 1 => *n -= 1,
                    Some(_) => {
                        self.handles.remove(&h);
                    }
                    None => return Err(Error::value_error(format!("unknown handle {h:#x}"))),
                }
                Ok(WireValue::None)
            }
            code::DEV_SET_DEVICE => {
                device_api(device(0)?)?;
                Ok(WireValue::None)
            }
            code::DEV_GET_ATTR => {
                let dev = device(0)?;
                let kind = DeviceAttr::from_i32(int(1)? as i32)?;
                match find_device_api(dev.device_type()) {
                    Some(api) => to_wire_pod(&api.get_attr(dev, kind)?),
                    None if kind == DeviceAttr::Exist => Ok(WireValue::Int(0)),
                    None => Err(Error::value_error(format!("no device API for {dev}"))),
                }
            }
            code::DEV_ALLOC_DATA => {
                let dev = device(0)?;
                let nbytes =
                    u64::try_from(int(1)?).map_err(|_| Error::value_error("negative size"))?;
                let align =
                    usize::try_from(int(2)?).map_err(|_| Error::value_error("bad alignment"))?;
                let dtype = match arg(3)? {
                    WireValue::DataType(t) => DataType(*t),
                    _ => DataType::uint(8),
                };
                self.alloc(dev, nbytes, align.max(64), dtype).map(opaque)
            }
            code::DEV_ALLOC_DATA_WITH_SCOPE => {
                let t = match arg(0)? {
                    WireValue::Tensor(t) => t,
                    other => {
                        return Err(Error::type_error(format!(
                            "expected a tensor, got {other:?}"
                        )))
                    }
                };
                match args.get(1) {
                    None | Some(WireValue::None) => {}
                    Some(WireValue::Str(s)) if s == b"global" => {}
                    Some(other) => {
                        return Err(Error::value_error(format!(
                            "unsupported memory scope {other:?}"
                        )))
                    }
                }
                let nbytes = t
                    .nbytes()
                    .ok_or_else(|| Error::value_error("tensor size overflows"))?;
                self.alloc(Device(t.device), nbytes, 64, DataType(t.dtype))
                    .map(opaque)
            }
            code::DEV_FREE_DATA => {
                let dev = device(0)?;
                let p = ptr(1)?;
                match self.allocs.remove(&p) {
                    Some(a) => {
                        HELD_BYTES.fetch_sub(a.size, std::sync::atomic::Ordering::SeqCst);
                        // SAFETY: the pointer came from this device's allocator, once.
                        unsafe { device_api(a.device)?.free_data_space(dev, p as *mut c_void)? }
                    }
                    None => return Err(Error::value_error(format!("unknown data pointer {p:#x}"))),
                }
                Ok(WireValue::None)
            }
            code::DEV_STREAM_SYNC => {
                let dev = device(0)?;
                no_stream(1)?;
                // SAFETY: NULL is the default stream.
                unsafe { device_api(dev)?.stream_sync(dev, std::ptr::null_mut())? };
                Ok(WireValue::None)
            }
            code::COPY_AMONG_REMOTE => {
                let (from, to) = match (arg(0)?, arg(1)?) {
                    (WireValue::Tensor(a), WireValue::Tensor(b)) => (a.clone(), b.clone()),
                    _ => return Err(Error::type_error("CopyAmongRemote takes two tensors")),
                };
                no_stream(2)?;
                if from.shape.iter().product::<i64>() != to.shape.iter().product::<i64>()
                    || from.dtype != to.dtype
                {
                    return Err(Error::value_error(
                        "CopyAmongRemote: shapes or dtypes differ",
                    ));
                }
                let n = from
                    .nbytes()
                    .ok_or_else(|| Error::value_error("size overflows"))?;
                self.region(&from, n)?;
                self.region(&to, n)?;
                let (mut fs, mut ts) = (from.shape.clone(), to.shape.clone());
                let (a, b) = (dl_tensor(&from, &mut fs), dl_tensor(&to, &mut ts));
                // SAFETY: both regions were checked against this session's memory.
                unsafe { copy_between(&a, &b, std::ptr::null_mut())? };
                Ok(WireValue::None)
            }
            code::DEV_CREATE_STREAM | code::DEV_GET_CURRENT_STREAM => {
                device_api(device(0)?)?;
                Ok(opaque(0))
            }
            code::DEV_FREE_STREAM | code::DEV_SET_STREAM => {
                device_api(device(0)?)?;
                no_stream(1)?;
                Ok(WireValue::None)
            }
            other => Err(Error::value_error(format!("unknown system call {other}"))),
        }
    }

    fn alloc(&mut self, dev: Device, nbytes: u64, align: usize, dtype: DataType) -> Result<u64> {
        let size = usize::try_from(nbytes).map_err(|_| Error::value_error("size too large"))?;
        let p = device_api(dev)?.alloc_data_space(dev, size, align, dtype)? as u64;
        HELD_BYTES.fetch_add(nbytes, std::sync::atomic::Ordering::SeqCst);
        self.allocs.insert(
            p,
            Allocation {
                device: dev,
                size: nbytes,
            },
        );
        Ok(p)
    }

    /// Gives an object to the client: its address is the handle.
    fn give(&mut self, obj: Any) -> u64 {
        let key = obj.view().object_ptr().map_or(0, |p| p.as_ptr() as u64);
        self.handles.entry(key).or_insert((obj, 0)).1 += 1;
        key
    }

    fn object(&self, handle: u64) -> Result<Any> {
        self.handles
            .get(&handle)
            .map(|(a, _)| a.clone())
            .ok_or_else(|| Error::value_error(format!("unknown remote handle {handle:#x}")))
    }

    /// The address of `nbytes` from `t`'s data and offset, checked to lie inside memory this
    /// session allocated or a tensor it handed out.
    fn region(&self, t: &WireTensor, nbytes: u64) -> Result<u64> {
        let start = t.data.checked_add(t.byte_offset);
        let end = start.and_then(|s| s.checked_add(nbytes));
        let (start, end) = match (start, end) {
            (Some(s), Some(e)) => (s, e),
            _ => return Err(Error::value_error("tensor range overflows")),
        };
        if let Some((&base, a)) = self.allocs.range(..=start).next_back() {
            if end <= base + a.size && a.device == Device(t.device) {
                return Ok(start);
            }
        }
        for (obj, _) in self.handles.values() {
            if obj.type_index() == ti::TENSOR {
                if let Ok(tensor) = obj.try_as::<Tensor>() {
                    let base = tensor.raw_data() as u64 + tensor.byte_offset();
                    if start >= base && end <= base + tensor.nbytes() as u64 {
                        return Ok(start);
                    }
                }
            }
        }
        Err(Error::value_error(format!(
            "tensor memory [{start:#x}, {end:#x}) is not memory of this session"
        )))
    }

    /// Copies `n` bytes between host memory at `host` and device memory this session
    /// allocated (an OpenCL buffer, ...), through the device's API: into the tensor's memory
    /// when `into_device`, out of it otherwise. The tensor must start in one of the session's
    /// device allocations and stay inside it.
    fn device_copy(&self, t: &WireTensor, host: *mut u8, n: u64, into_device: bool) -> Result<()> {
        let dev = Device(t.device);
        let fits = self.allocs.get(&t.data).is_some_and(|a| {
            a.device == dev
                && t.byte_offset
                    .checked_add(n)
                    .is_some_and(|end| end <= a.size)
        });
        if !fits {
            return Err(Error::value_error(format!(
                "{n} bytes at offset {} of {dev} buffer {:#x} are not memory of this session",
                t.byte_offset, t.data
            )));
        }
        let mut shape = [n as i64];
        let shape = shape.as_mut_ptr();
        let bytes = |data: *mut c_void, device, byte_offset| DLTensor {
            data,
            device,
            ndim: 1,
            dtype: DataType::uint(8).0,
            shape,
            strides: std::ptr::null_mut(),
            byte_offset,
        };
        let remote = bytes(t.data as *mut c_void, t.device, t.byte_offset);
        let local = bytes(host as *mut c_void, Device::cpu(0).0, 0);
        let (from, to) = if into_device {
            (&local, &remote)
        } else {
            (&remote, &local)
        };
        // SAFETY: the device side lies inside one of this session's allocations (checked
        // above) and the host side is `n` bytes the caller owns.
        unsafe { kiln_runtime::device::copy_between(from, to, std::ptr::null_mut()) }
    }

    fn arguments(&self, args: &[WireValue]) -> Result<CallArgs> {
        let mut values = Vec::with_capacity(args.len());
        let mut tensors = Vec::new();
        for v in args {
            values.push(match v {
                WireValue::None => Any::none(),
                WireValue::Int(x) => (*x).into(),
                WireValue::Bool(b) => (*b).into(),
                WireValue::Float(f) => (*f).into(),
                WireValue::OpaquePtr(p) => (*p as *mut c_void).into(),
                WireValue::DataType(t) => DataType(*t).into(),
                WireValue::Device(d) => Device(*d).into(),
                WireValue::Str(s) => Any::from_str_bytes(s),
                WireValue::Bytes(b) => Any::from_bytes_slice(b),
                WireValue::Function(h) | WireValue::Module(h) | WireValue::ObjectRef(h) => {
                    self.object(*h)?
                }
                WireValue::Tensor(t) => {
                    let n = t
                        .nbytes()
                        .ok_or_else(|| Error::value_error("tensor size overflows"))?;
                    self.region(t, n)?;
                    let mut shape = t.shape.clone();
                    let mut dl = Box::new(dl_tensor(t, &mut shape));
                    let p: *mut DLTensor = &mut *dl;
                    tensors.push((dl, shape));
                    p.into()
                }
            });
        }
        Ok(CallArgs {
            values,
            _tensors: tensors,
        })
    }

    /// Encodes a return value as TVM's `EncodeReturn` does: the type index, then the value;
    /// objects travel as handles, tensors as metadata plus handle.
    fn encode_return(&mut self, rv: Any) -> Result<Vec<WireValue>> {
        let index = rv.type_index();
        let tag = WireValue::Int(index as i64);
        let view = rv.view();
        Ok(match index {
            ti::STR | ti::SMALL_STR => vec![
                tag,
                WireValue::Str(view.str_bytes().unwrap_or(&[]).to_vec()),
            ],
            ti::BYTES | ti::SMALL_BYTES => {
                vec![
                    tag,
                    WireValue::Bytes(view.bytes_bytes().unwrap_or(&[]).to_vec()),
                ]
            }
            ti::TENSOR => {
                let t: Tensor = rv.try_as()?;
                if !t.is_contiguous() {
                    return Err(Error::value_error("a returned tensor must be contiguous"));
                }
                let dl = t.dl_tensor();
                let wire = WireTensor {
                    data: dl.data as u64,
                    device: dl.device,
                    dtype: dl.dtype,
                    shape: t.shape().to_vec(),
                    byte_offset: dl.byte_offset,
                };
                let h = self.give(rv);
                vec![tag, WireValue::Tensor(wire), opaque(h)]
            }
            i if i >= ti::STATIC_OBJECT_BEGIN => {
                let h = self.give(rv);
                vec![tag, opaque(h)]
            }
            _ => vec![tag, to_wire_pod(&rv)?],
        })
    }
}

impl Drop for ServerSession {
    fn drop(&mut self) {
        self.handles.clear();
        for (p, a) in std::mem::take(&mut self.allocs) {
            HELD_BYTES.fetch_sub(a.size, std::sync::atomic::Ordering::SeqCst);
            if let Ok(api) = device_api(a.device) {
                // SAFETY: each pointer came from this allocator and is freed once.
                let _ = unsafe { api.free_data_space(a.device, p as *mut c_void) };
            }
        }
    }
}

/// A checked region that the server can read or write directly (host memory).
fn host_region(s: &ServerSession, t: &WireTensor, nbytes: u64) -> Result<u64> {
    if !kiln_runtime::device::is_host(Device(t.device)) {
        return Err(Error::value_error(format!(
            "copies to and from {} are not supported by this server",
            Device(t.device)
        )));
    }
    s.region(t, nbytes)
}

fn dl_tensor(t: &WireTensor, shape: &mut [i64]) -> DLTensor {
    DLTensor {
        data: t.data as *mut c_void,
        device: t.device,
        ndim: shape.len() as i32,
        dtype: t.dtype,
        shape: shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: t.byte_offset,
    }
}

/// A plain (non-object) value on the wire.
pub(crate) fn to_wire_pod(v: &Any) -> Result<WireValue> {
    let view = v.view();
    let raw = view.raw();
    // SAFETY: each arm reads the union member its type index selects.
    Ok(unsafe {
        match view.type_index() {
            ti::NONE => WireValue::None,
            ti::INT => WireValue::Int(raw.value.v_int64),
            ti::BOOL => WireValue::Bool(raw.value.v_int64 != 0),
            ti::FLOAT => WireValue::Float(raw.value.v_float64),
            ti::OPAQUE_PTR => WireValue::OpaquePtr(raw.value.v_ptr as u64),
            ti::DATA_TYPE => WireValue::DataType(raw.value.v_dtype),
            ti::DEVICE => WireValue::Device(raw.value.v_device),
            ti::STR | ti::SMALL_STR => WireValue::Str(view.str_bytes().unwrap_or(&[]).to_vec()),
            ti::BYTES | ti::SMALL_BYTES => {
                WireValue::Bytes(view.bytes_bytes().unwrap_or(&[]).to_vec())
            }
            other => {
                return Err(Error::type_error(format!(
                    "a value of type {} cannot travel over RPC here",
                    kiln_ffi::any::type_name_of_index(other)
                )))
            }
        }
    })
}

fn exception_packet(e: &Error) -> Vec<u8> {
    encode_exception(&format!("{}: {}", e.kind(), e.message()))
}

fn io_err(e: std::io::Error) -> Error {
    Error::runtime_error(format!("RPC I/O: {e}"))
}
