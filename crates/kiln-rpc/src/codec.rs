//! The wire format: values of a packed argument sequence, tensors' metadata and whole packets,
//! encoded as TVM's `RPCReference` does (little-endian, no alignment). Decoding never trusts a
//! length: every read is checked against what the packet holds, so a malformed or truncated
//! packet is an error, never a panic or an oversized allocation.

use crate::protocol::{code, MAX_WIRE_NDIM, RPC_OBJECT_REF_TYPE_INDEX};
use kiln_ffi::abi::{type_index as ti, DLDataType, DLDevice};
use std::fmt;

/// A decoding failure: what was expected and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed RPC packet: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

impl From<DecodeError> for kiln_ffi::Error {
    fn from(e: DecodeError) -> Self {
        kiln_ffi::Error::value_error(e.to_string())
    }
}

/// Result of decoding.
pub type DecodeResult<T> = Result<T, DecodeError>;

/// A tensor's metadata as it travels: the remote data pointer and a compact shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireTensor {
    /// The data pointer in the address space of the side that owns the memory.
    pub data: u64,
    /// The device, without session mask.
    pub device: DLDevice,
    /// Element type.
    pub dtype: DLDataType,
    /// Dimensions.
    pub shape: Vec<i64>,
    /// Offset of the first element from `data`, in bytes.
    pub byte_offset: u64,
}

impl WireTensor {
    /// Bytes of the elements (None when the size overflows or a dimension is negative).
    pub fn nbytes(&self) -> Option<u64> {
        let mut n: u64 = 1;
        for &d in &self.shape {
            n = n.checked_mul(u64::try_from(d).ok()?)?;
        }
        let bits = u64::from(self.dtype.bits).checked_mul(u64::from(self.dtype.lanes))?;
        n.checked_mul(bits)?.checked_add(7).map(|b| b / 8)
    }
}

/// One value of a packed sequence as it travels.
#[derive(Clone, Debug, PartialEq)]
pub enum WireValue {
    /// None.
    None,
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A float.
    Float(f64),
    /// An opaque pointer (a remote address or handle).
    OpaquePtr(u64),
    /// A data type.
    DataType(DLDataType),
    /// A device (without session mask).
    Device(DLDevice),
    /// A handle to a function on the side that owns it.
    Function(u64),
    /// A handle to a module on the side that owns it.
    Module(u64),
    /// A handle to another object on the side that owns it.
    ObjectRef(u64),
    /// A string (sent as a raw C string, or a string object).
    Str(Vec<u8>),
    /// Bytes (sent as a byte array, or a bytes object).
    Bytes(Vec<u8>),
    /// A tensor's metadata.
    Tensor(WireTensor),
}

/// A decoded packet; the bytes of `CopyToRemote` and `CopyAck` borrow the packet body.
#[derive(Clone, Debug, PartialEq)]
pub enum Packet<'a> {
    /// The peer ends the session.
    Shutdown,
    /// The client's first packet.
    InitServer {
        /// The client's protocol version.
        version: String,
        /// Session constructor name and arguments (empty: the local session).
        args: Vec<WireValue>,
    },
    /// A call of a remote function.
    CallFunc {
        /// The function handle.
        handle: u64,
        /// The arguments.
        args: Vec<WireValue>,
    },
    /// A return value (encoded as the return convention says).
    Return(Vec<WireValue>),
    /// An error raised by the peer.
    Exception(String),
    /// A request for the bytes of a remote tensor.
    CopyFromRemote {
        /// The remote tensor.
        tensor: WireTensor,
        /// How many bytes.
        nbytes: u64,
    },
    /// Bytes to write into a remote tensor.
    CopyToRemote {
        /// The remote tensor.
        tensor: WireTensor,
        /// The bytes.
        data: &'a [u8],
    },
    /// The bytes asked for by `CopyFromRemote`.
    CopyAck(&'a [u8]),
    /// A system call (codes from [`code::SYSCALL_START`]).
    Syscall {
        /// The code.
        code: i32,
        /// The arguments.
        args: Vec<WireValue>,
    },
}

/// Appends wire values to a buffer.
#[derive(Default)]
pub struct Writer {
    /// The bytes written so far.
    pub buf: Vec<u8>,
}

impl Writer {
    /// A writer that starts a packet: room for its length, then `code`.
    pub fn packet(code: i32) -> Writer {
        let mut w = Writer {
            buf: Vec::with_capacity(64),
        };
        w.u64(0);
        w.i32(code);
        w
    }

    /// Fills in the packet length and returns the bytes to send.
    pub fn finish(mut self) -> Vec<u8> {
        let n = (self.buf.len() - 8) as u64;
        self.buf[..8].copy_from_slice(&n.to_le_bytes());
        self.buf
    }

    /// Writes an `i32`.
    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Writes a `u64`.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Writes an `i64`.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Writes raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// Writes a length-prefixed byte string.
    pub fn len_bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.bytes(b);
    }

    fn device(&mut self, d: DLDevice) {
        self.i32(d.device_type);
        self.i32(d.device_id);
    }

    fn dtype(&mut self, t: DLDataType) {
        self.buf.push(t.code);
        self.buf.push(t.bits);
        self.buf.extend_from_slice(&t.lanes.to_le_bytes());
    }

    /// Writes a tensor's metadata.
    pub fn tensor(&mut self, t: &WireTensor) {
        self.u64(t.data);
        self.device(t.device);
        self.i32(t.shape.len() as i32);
        self.dtype(t.dtype);
        for &d in &t.shape {
            self.i64(d);
        }
        self.u64(t.byte_offset);
    }

    /// Writes one value with its type index.
    pub fn value(&mut self, v: &WireValue) {
        match v {
            WireValue::None => self.i32(ti::NONE),
            WireValue::Int(x) => {
                self.i32(ti::INT);
                self.i64(*x);
            }
            WireValue::Bool(b) => {
                self.i32(ti::BOOL);
                self.i64(*b as i64);
            }
            WireValue::Float(f) => {
                self.i32(ti::FLOAT);
                self.buf.extend_from_slice(&f.to_bits().to_le_bytes());
            }
            WireValue::OpaquePtr(p) => {
                self.i32(ti::OPAQUE_PTR);
                self.u64(*p);
            }
            WireValue::DataType(t) => {
                self.i32(ti::DATA_TYPE);
                self.dtype(*t);
                self.i32(0);
            }
            WireValue::Device(d) => {
                self.i32(ti::DEVICE);
                self.device(*d);
            }
            WireValue::Function(h) => {
                self.i32(ti::FUNCTION);
                self.u64(*h);
            }
            WireValue::Module(h) => {
                self.i32(ti::MODULE);
                self.u64(*h);
            }
            WireValue::ObjectRef(h) => {
                self.i32(RPC_OBJECT_REF_TYPE_INDEX);
                self.i32(RPC_OBJECT_REF_TYPE_INDEX);
                self.u64(*h);
            }
            WireValue::Str(s) => {
                self.i32(ti::RAW_STR);
                self.len_bytes(s);
            }
            WireValue::Bytes(b) => {
                self.i32(ti::BYTE_ARRAY_PTR);
                self.len_bytes(b);
            }
            WireValue::Tensor(t) => {
                self.i32(ti::DL_TENSOR_PTR);
                self.tensor(t);
            }
        }
    }

    /// Writes a packed sequence: count, then the values.
    pub fn seq(&mut self, values: &[WireValue]) {
        self.i32(values.len() as i32);
        for v in values {
            self.value(v);
        }
    }
}

/// Reads wire values from a packet body, checking every length.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Takes `n` bytes.
    pub fn take(&mut self, n: u64, what: &str) -> DecodeResult<&'a [u8]> {
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.remaining())
            .ok_or_else(|| {
                DecodeError(format!(
                    "{what} needs {n} bytes but {} remain",
                    self.remaining()
                ))
            })?;
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> DecodeResult<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Reads an `i32`.
    pub fn i32(&mut self, what: &str) -> DecodeResult<i32> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }

    /// Reads a `u32`.
    pub fn u32(&mut self, what: &str) -> DecodeResult<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// Reads a `u64`.
    pub fn u64(&mut self, what: &str) -> DecodeResult<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Reads an `i64`.
    pub fn i64(&mut self, what: &str) -> DecodeResult<i64> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }

    fn device(&mut self) -> DecodeResult<DLDevice> {
        Ok(DLDevice {
            device_type: self.i32("device type")?,
            device_id: self.i32("device id")?,
        })
    }

    fn dtype(&mut self) -> DecodeResult<DLDataType> {
        let b: [u8; 4] = self.array("dtype")?;
        Ok(DLDataType {
            code: b[0],
            bits: b[1],
            lanes: u16::from_le_bytes([b[2], b[3]]),
        })
    }

    fn len_bytes(&mut self, what: &str) -> DecodeResult<Vec<u8>> {
        let n = self.u64(what)?;
        Ok(self.take(n, what)?.to_vec())
    }

    /// Reads a tensor's metadata.
    pub fn tensor(&mut self) -> DecodeResult<WireTensor> {
        let data = self.u64("tensor data")?;
        let device = self.device()?;
        let ndim = self.i32("tensor ndim")?;
        if !(0..=MAX_WIRE_NDIM).contains(&ndim) {
            return Err(DecodeError(format!(
                "tensor ndim {ndim} outside 0..={MAX_WIRE_NDIM}"
            )));
        }
        let dtype = self.dtype()?;
        let mut shape = Vec::with_capacity(ndim as usize);
        for _ in 0..ndim {
            shape.push(self.i64("tensor shape")?);
        }
        let byte_offset = self.u64("tensor byte_offset")?;
        Ok(WireTensor {
            data,
            device,
            dtype,
            shape,
            byte_offset,
        })
    }

    /// Reads one value.
    pub fn value(&mut self) -> DecodeResult<WireValue> {
        let index = self.i32("type index")?;
        Ok(match index {
            ti::NONE => WireValue::None,
            ti::INT => WireValue::Int(self.i64("int")?),
            ti::BOOL => WireValue::Bool(self.i64("bool")? != 0),
            ti::FLOAT => WireValue::Float(f64::from_bits(self.u64("float")?)),
            ti::OPAQUE_PTR => WireValue::OpaquePtr(self.u64("handle")?),
            ti::DATA_TYPE => {
                let t = self.dtype()?;
                self.i32("dtype padding")?;
                WireValue::DataType(t)
            }
            ti::DEVICE => WireValue::Device(self.device()?),
            ti::FUNCTION => WireValue::Function(self.u64("function handle")?),
            ti::MODULE => WireValue::Module(self.u64("module handle")?),
            ti::RAW_STR => WireValue::Str(self.len_bytes("string")?),
            ti::BYTE_ARRAY_PTR => WireValue::Bytes(self.len_bytes("bytes")?),
            ti::DL_TENSOR_PTR => WireValue::Tensor(self.tensor()?),
            i if i >= ti::STATIC_OBJECT_BEGIN || i == ti::SMALL_STR || i == ti::SMALL_BYTES => {
                // Objects travel with a second (u32) type index, then their payload.
                let inner = self.u32("object type index")? as i32;
                match inner {
                    ti::STR => WireValue::Str(self.len_bytes("string object")?),
                    ti::BYTES => WireValue::Bytes(self.len_bytes("bytes object")?),
                    RPC_OBJECT_REF_TYPE_INDEX => WireValue::ObjectRef(self.u64("object handle")?),
                    other => {
                        return Err(DecodeError(format!(
                            "object of type index {other} cannot travel over RPC"
                        )))
                    }
                }
            }
            other => return Err(DecodeError(format!("unknown type index {other}"))),
        })
    }

    /// Reads a packed sequence.
    pub fn seq(&mut self) -> DecodeResult<Vec<WireValue>> {
        let n = self.i32("argument count")?;
        // Every value takes at least 4 bytes: a count beyond that is a lie.
        if n < 0 || n as usize > self.remaining() / 4 {
            return Err(DecodeError(format!(
                "argument count {n} with {} bytes left",
                self.remaining()
            )));
        }
        (0..n).map(|_| self.value()).collect()
    }

    /// Fails when bytes remain.
    pub fn end(&self) -> DecodeResult<()> {
        if self.remaining() != 0 {
            return Err(DecodeError(format!(
                "{} bytes left over after the packet",
                self.remaining()
            )));
        }
        Ok(())
    }
}

/// Decodes one packet body (what follows the `u64` length).
pub fn decode_packet(body: &[u8]) -> DecodeResult<Packet<'_>> {
    let mut r = Reader::new(body);
    let c = r.i32("packet code")?;
    let packet = match c {
        code::SHUTDOWN => Packet::Shutdown,
        code::INIT_SERVER => {
            let v = r.len_bytes("protocol version")?;
            Packet::InitServer {
                version: String::from_utf8_lossy(&v).into_owned(),
                args: r.seq()?,
            }
        }
        code::CALL_FUNC => Packet::CallFunc {
            handle: r.u64("function handle")?,
            args: r.seq()?,
        },
        code::RETURN => Packet::Return(r.seq()?),
        code::EXCEPTION => {
            let args = r.seq()?;
            match args.first() {
                Some(WireValue::Str(s)) => Packet::Exception(String::from_utf8_lossy(s).into()),
                _ => return Err(DecodeError("exception without a message".into())),
            }
        }
        code::COPY_FROM_REMOTE => Packet::CopyFromRemote {
            tensor: r.tensor()?,
            nbytes: r.u64("copy size")?,
        },
        code::COPY_TO_REMOTE => {
            let tensor = r.tensor()?;
            let n = r.u64("copy size")?;
            Packet::CopyToRemote {
                tensor,
                data: r.take(n, "copied bytes")?,
            }
        }
        code::COPY_ACK => {
            let n = r.remaining() as u64;
            Packet::CopyAck(r.take(n, "copied bytes")?)
        }
        c if (code::SYSCALL_START..code::END).contains(&c) => Packet::Syscall {
            code: c,
            args: r.seq()?,
        },
        other => return Err(DecodeError(format!("unknown packet code {other}"))),
    };
    r.end()?;
    Ok(packet)
}

/// Encodes a packed-sequence packet (`CallFunc` with a handle, `Return`, system calls).
pub fn encode_seq_packet(code: i32, handle: Option<u64>, args: &[WireValue]) -> Vec<u8> {
    let mut w = Writer::packet(code);
    if let Some(h) = handle {
        w.u64(h);
    }
    w.seq(args);
    w.finish()
}

/// Encodes an exception packet carrying `msg`.
pub fn encode_exception(msg: &str) -> Vec<u8> {
    encode_seq_packet(
        code::EXCEPTION,
        None,
        &[WireValue::Str(msg.as_bytes().to_vec())],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(v: WireValue) {
        let p = encode_seq_packet(code::RETURN, None, std::slice::from_ref(&v));
        assert_eq!(
            u64::from_le_bytes(p[..8].try_into().unwrap()),
            p.len() as u64 - 8
        );
        match decode_packet(&p[8..]).unwrap() {
            Packet::Return(vals) => assert_eq!(vals, vec![v]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn values_round_trip() {
        round_trip(WireValue::None);
        round_trip(WireValue::Int(-5));
        round_trip(WireValue::Bool(true));
        round_trip(WireValue::Float(2.5));
        round_trip(WireValue::OpaquePtr(0xdead_beef));
        round_trip(WireValue::DataType(DLDataType {
            code: 2,
            bits: 32,
            lanes: 4,
        }));
        round_trip(WireValue::Device(DLDevice {
            device_type: 1,
            device_id: 3,
        }));
        round_trip(WireValue::Function(77));
        round_trip(WireValue::Module(78));
        round_trip(WireValue::ObjectRef(79));
        round_trip(WireValue::Str(b"hello".to_vec()));
        round_trip(WireValue::Bytes(vec![0, 1, 2]));
        round_trip(WireValue::Tensor(WireTensor {
            data: 4096,
            device: DLDevice {
                device_type: 1,
                device_id: 0,
            },
            dtype: DLDataType {
                code: 2,
                bits: 32,
                lanes: 1,
            },
            shape: vec![2, 3],
            byte_offset: 8,
        }));
    }

    #[test]
    fn string_objects_decode_as_tvm_sends_them() {
        // [i32 65][u32 65][u64 len][bytes]: a string object as TVM's WriteFFIAny writes it.
        let mut w = Writer::packet(code::RETURN);
        w.i32(1);
        w.i32(ti::STR);
        w.i32(ti::STR);
        w.len_bytes(b"abc");
        let p = w.finish();
        assert_eq!(
            decode_packet(&p[8..]).unwrap(),
            Packet::Return(vec![WireValue::Str(b"abc".to_vec())])
        );
    }

    #[test]
    fn truncations_are_errors() {
        let p = encode_seq_packet(
            code::CALL_FUNC,
            Some(5),
            &[WireValue::Str(b"abcdef".to_vec()), WireValue::Int(3)],
        );
        for cut in 8..p.len() {
            assert!(decode_packet(&p[8..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode_packet(&p[8..]).is_ok());
    }
}
