//! The numbers of TVM's RPC protocol (0.27, protocol version "0.8.0"): magic words, handshake
//! answers, packet codes, tracker codes and the session mask of remote devices.

/// Magic word that opens an RPC connection (TVM's `kRPCMagic`).
pub const RPC_MAGIC: i32 = 0xff271;
/// Magic word of the tracker protocol (`kRPCTrackerMagic`).
pub const RPC_TRACKER_MAGIC: i32 = 0x2f271;
/// Handshake answer: the key matched.
pub const RPC_CODE_SUCCESS: i32 = RPC_MAGIC;
/// Handshake answer: the key is already in use (proxies).
pub const RPC_CODE_DUPLICATE: i32 = RPC_MAGIC + 1;
/// Handshake answer: the key did not match.
pub const RPC_CODE_MISMATCH: i32 = RPC_MAGIC + 2;
/// The protocol version the client sends in `InitServer`.
pub const PROTOCOL_VERSION: &str = "0.8.0";
/// Added (times session index + 1) to a device type to name a device of a remote session.
pub const RPC_SESS_MASK: i32 = 128;
/// Type index TVM uses on the wire for a handle to a remote object of another kind.
pub const RPC_OBJECT_REF_TYPE_INDEX: i32 = 128 - 13;
/// Largest handshake key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 4096;
/// Default bound on one packet, in bytes (1 GiB).
pub const DEFAULT_MAX_PACKET_BYTES: u64 = 1 << 30;
/// Largest number of dimensions of a tensor on the wire.
pub const MAX_WIRE_NDIM: i32 = 64;

/// Packet codes (`RPCCode`); codes from [`code::SYSCALL_START`] are system calls.
pub mod code {
    /// No code.
    pub const NONE: i32 = 0;
    /// Ends the session.
    pub const SHUTDOWN: i32 = 1;
    /// Client's first packet: protocol version and session constructor.
    pub const INIT_SERVER: i32 = 2;
    /// Calls a remote function by handle.
    pub const CALL_FUNC: i32 = 3;
    /// A return value.
    pub const RETURN: i32 = 4;
    /// An error with its message.
    pub const EXCEPTION: i32 = 5;
    /// Reads bytes of a remote tensor.
    pub const COPY_FROM_REMOTE: i32 = 6;
    /// Writes bytes into a remote tensor.
    pub const COPY_TO_REMOTE: i32 = 7;
    /// The bytes read by `COPY_FROM_REMOTE`.
    pub const COPY_ACK: i32 = 8;
    /// First system call code.
    pub const SYSCALL_START: i32 = 9;
    /// Looks a global function up by name.
    pub const GET_GLOBAL_FUNC: i32 = 9;
    /// Releases a handle given to the client.
    pub const FREE_HANDLE: i32 = 10;
    /// Selects a device.
    pub const DEV_SET_DEVICE: i32 = 11;
    /// Reads a device attribute.
    pub const DEV_GET_ATTR: i32 = 12;
    /// Allocates device memory by size.
    pub const DEV_ALLOC_DATA: i32 = 13;
    /// Frees device memory.
    pub const DEV_FREE_DATA: i32 = 14;
    /// Waits for a stream.
    pub const DEV_STREAM_SYNC: i32 = 15;
    /// Copies between two remote tensors.
    pub const COPY_AMONG_REMOTE: i32 = 16;
    /// Allocates device memory for a shape (with an optional memory scope).
    pub const DEV_ALLOC_DATA_WITH_SCOPE: i32 = 17;
    /// Creates a stream.
    pub const DEV_CREATE_STREAM: i32 = 18;
    /// Frees a stream.
    pub const DEV_FREE_STREAM: i32 = 19;
    /// Sets the current stream.
    pub const DEV_SET_STREAM: i32 = 20;
    /// Reads the current stream.
    pub const DEV_GET_CURRENT_STREAM: i32 = 21;
    /// One past the last known code.
    pub const END: i32 = 22;
}

/// Tracker request and answer codes (`TrackerCode`).
pub mod tracker_code {
    /// Failure answer.
    pub const FAIL: i64 = -1;
    /// Success answer.
    pub const SUCCESS: i64 = 0;
    /// Liveness check.
    pub const PING: i64 = 1;
    /// Stops the tracker (with its stop key).
    pub const STOP: i64 = 2;
    /// A server offers itself under a key.
    pub const PUT: i64 = 3;
    /// A client asks for a server by key.
    pub const REQUEST: i64 = 4;
    /// A connection describes itself.
    pub const UPDATE_INFO: i64 = 5;
    /// Queue and server summary.
    pub const SUMMARY: i64 = 6;
    /// Match keys handed to clients but not yet used.
    pub const GET_PENDING_MATCHKEYS: i64 = 7;
}

/// The session index encoded in a remote device type, or None for a local device.
pub fn session_index_of(device_type: i32) -> Option<usize> {
    if device_type >= RPC_SESS_MASK {
        Some((device_type / RPC_SESS_MASK - 1) as usize)
    } else {
        None
    }
}

/// The device type without its session mask.
pub fn strip_session_mask(device_type: i32) -> i32 {
    device_type % RPC_SESS_MASK
}
