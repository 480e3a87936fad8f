//! Remote devices: the table of open sessions (a session's index is encoded in its devices'
//! type as `128 * (index + 1) + type`, as TVM does) and the device API that turns allocation,
//! copies and attributes on such a device into requests to its session. Through it, Kiln's
//! ordinary tensors (`Tensor::empty`, `copy_from`, Python's `kiln.empty` / `.numpy()`) work on
//! remote devices unchanged.

use super::connection::{wire_tensor, Connection};
use crate::codec::{WireTensor, WireValue};
use crate::protocol::{code, session_index_of, strip_session_mask, RPC_SESS_MASK};
use kiln_ffi::abi::DLTensor;
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{Any, DataType, Device, Error, Result};
use kiln_runtime::device::{is_host, register_device_api, DeviceApi, DeviceAttr, StreamHandle};
use kiln_runtime::tensor::Tensor;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, Weak};

/// Device types below this (without mask) get a remote device API.
const MAX_BASE_DEVICE_TYPE: i32 = 32;
/// The device registry holds types below 4096: sessions with devices must fit.
const MAX_DEVICE_SESSIONS: usize = (4096 / RPC_SESS_MASK as usize) - 1;

fn sessions() -> std::sync::MutexGuard<'static, Vec<Weak<Connection>>> {
    static TABLE: std::sync::OnceLock<Mutex<Vec<Weak<Connection>>>> = std::sync::OnceLock::new();
    TABLE.get_or_init(Default::default).lock().recover()
}

/// Records a connection in the first free slot of the session table; returns the slot.
pub(crate) fn register(conn: &Arc<Connection>) -> usize {
    let mut t = sessions();
    let index = t
        .iter()
        .position(|w| w.strong_count() == 0)
        .unwrap_or(t.len());
    if index == t.len() {
        t.push(Arc::downgrade(conn));
    } else {
        t[index] = Arc::downgrade(conn);
    }
    index
}

/// The session a remote device belongs to.
pub fn session_of(dev: Device) -> Result<Arc<Connection>> {
    let index = session_index_of(dev.device_type())
        .ok_or_else(|| Error::value_error(format!("{dev} is not a remote device")))?;
    sessions()
        .get(index)
        .and_then(|w| w.upgrade())
        .ok_or_else(|| Error::runtime_error(format!("the RPC session {index} is closed")))
}

/// The remote device `device_type:device_id` of `conn` (registering its device API).
pub fn remote_device(conn: &Arc<Connection>, device_type: i32, device_id: i32) -> Result<Device> {
    let index = conn.index();
    if index >= MAX_DEVICE_SESSIONS {
        return Err(Error::runtime_error(format!(
            "too many RPC sessions with remote devices at once (at most {MAX_DEVICE_SESSIONS})"
        )));
    }
    if !(1..MAX_BASE_DEVICE_TYPE).contains(&device_type) {
        return Err(Error::value_error(format!("bad device type {device_type}")));
    }
    let base = RPC_SESS_MASK * (index as i32 + 1);
    for t in 1..MAX_BASE_DEVICE_TYPE {
        register_device_api(base + t, &RPC_DEVICE_API, true)?;
    }
    Ok(Device::new(base + device_type, device_id))
}

fn strip(dev: Device) -> Device {
    Device::new(strip_session_mask(dev.device_type()), dev.device_id())
}

fn wire(dl: &DLTensor) -> Result<WireTensor> {
    // SAFETY: callers pass live tensors.
    match unsafe { wire_tensor(dl)? } {
        WireValue::Tensor(t) => Ok(t),
        _ => unreachable!("wire_tensor makes tensors"),
    }
}

/// Bytes of a compact host tensor, as a slice from its byte offset.
///
/// # Safety
/// `dl` must describe live, compact host memory.
unsafe fn host_bytes<'a>(dl: &DLTensor) -> Result<&'a mut [u8]> {
    let t = wire(dl)?;
    let n = t
        .nbytes()
        .ok_or_else(|| Error::value_error("tensor size overflows"))? as usize;
    if n == 0 {
        return Ok(&mut []);
    }
    // SAFETY: the caller guarantees live, compact host memory: n bytes from the byte offset.
    Ok(unsafe {
        let p = (dl.data as *mut u8).add(dl.byte_offset as usize);
        std::slice::from_raw_parts_mut(p, n)
    })
}

/// The device API of remote devices.
pub struct RpcDeviceApi;

static RPC_DEVICE_API: RpcDeviceApi = RpcDeviceApi;

impl DeviceApi for RpcDeviceApi {
    fn name(&self) -> &'static str {
        "rpc"
    }

    fn get_attr(&self, dev: Device, kind: DeviceAttr) -> Result<Any> {
        let conn = session_of(dev)?;
        let v = conn.syscall(
            code::DEV_GET_ATTR,
            &[WireValue::Device(strip(dev).0), WireValue::Int(kind as i64)],
        )?;
        conn.decode_return(vec![WireValue::Int(wire_index(&v) as i64), v])
    }

    fn alloc_data_space(
        &self,
        dev: Device,
        nbytes: usize,
        alignment: usize,
        dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        let conn = session_of(dev)?;
        match conn.syscall(
            code::DEV_ALLOC_DATA,
            &[
                WireValue::Device(strip(dev).0),
                WireValue::Int(nbytes as i64),
                WireValue::Int(alignment as i64),
                WireValue::DataType(dtype_hint.0),
            ],
        )? {
            WireValue::OpaquePtr(p) => Ok(p as *mut c_void),
            other => Err(Error::runtime_error(format!(
                "remote allocation returned {other:?}"
            ))),
        }
    }

    unsafe fn free_data_space(&self, dev: Device, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        // A closed session has released its memory already.
        if let Ok(conn) = session_of(dev) {
            if !conn.is_closed() {
                let _ = conn.syscall(
                    code::DEV_FREE_DATA,
                    &[
                        WireValue::Device(strip(dev).0),
                        WireValue::OpaquePtr(ptr as u64),
                    ],
                );
            }
        }
        Ok(())
    }

    unsafe fn copy_data_from_to(
        &self,
        from: &DLTensor,
        to: &DLTensor,
        _stream: StreamHandle,
    ) -> Result<()> {
        let (fd, td) = (Device(from.device), Device(to.device));
        let (fr, tr) = (
            session_index_of(fd.device_type()),
            session_index_of(td.device_type()),
        );
        match (fr, tr) {
            (Some(a), Some(b)) if a == b => {
                session_of(fd)?.syscall(
                    code::COPY_AMONG_REMOTE,
                    &[
                        WireValue::Tensor(wire(from)?),
                        WireValue::Tensor(wire(to)?),
                        WireValue::OpaquePtr(0),
                    ],
                )?;
                Ok(())
            }
            (Some(_), None) if is_host(td) => {
                // SAFETY: the DeviceApi contract: `to` describes live memory, here on the host.
                session_of(fd)?.copy_from_remote(&wire(from)?, unsafe { host_bytes(to)? })
            }
            (None, Some(_)) if is_host(fd) => {
                // SAFETY: the DeviceApi contract: `from` describes live memory, here on the host.
                session_of(td)?.copy_to_remote(&wire(to)?, unsafe { host_bytes(from)? })
            }
            _ => Err(Error::value_error(format!(
                "cannot copy from {fd} to {td}: copies go between a remote device and the host, \
                 or within one session"
            ))),
        }
    }

    unsafe fn stream_sync(&self, dev: Device, _stream: StreamHandle) -> Result<()> {
        // Remote CPU work is finished when its reply arrives; other devices are asked.
        if strip_session_mask(dev.device_type()) == kiln_ffi::device::device_type::CPU {
            return Ok(());
        }
        session_of(dev)?.syscall(
            code::DEV_STREAM_SYNC,
            &[WireValue::Device(strip(dev).0), WireValue::OpaquePtr(0)],
        )?;
        Ok(())
    }
}

fn wire_index(v: &WireValue) -> i32 {
    use kiln_ffi::abi::type_index as ti;
    match v {
        WireValue::None => ti::NONE,
        WireValue::Int(_) => ti::INT,
        WireValue::Bool(_) => ti::BOOL,
        WireValue::Float(_) => ti::FLOAT,
        WireValue::Str(_) => ti::STR,
        WireValue::Bytes(_) => ti::BYTES,
        WireValue::OpaquePtr(_) => ti::OPAQUE_PTR,
        WireValue::DataType(_) => ti::DATA_TYPE,
        WireValue::Device(_) => ti::DEVICE,
        _ => ti::NONE,
    }
}

/// A tensor a remote function returned: copied into a new remote tensor that this side owns
/// (the server's own is released by the caller).
pub(crate) fn copy_returned_tensor(conn: &Arc<Connection>, t: &WireTensor) -> Result<Any> {
    let dev = remote_device(conn, t.device.device_type, t.device.device_id)?;
    let out = Tensor::empty(&t.shape, DataType(t.dtype), dev)?;
    let dst = wire(out.dl_tensor())?;
    conn.syscall(
        code::COPY_AMONG_REMOTE,
        &[
            WireValue::Tensor(t.clone()),
            WireValue::Tensor(dst),
            WireValue::OpaquePtr(0),
        ],
    )?;
    Ok(out.into())
}
