//! Moving bytes: the handshake of a connection and length-prefixed packets over a stream.

use crate::protocol::{MAX_KEY_BYTES, RPC_CODE_SUCCESS, RPC_MAGIC};
use kiln_ffi::{Error, Result};
use std::io::{Read, Write};

fn io_error(what: &str, e: std::io::Error) -> Error {
    Error::runtime_error(format!("RPC {what}: {e}"))
}

/// Reads an `i32`.
pub fn read_i32(s: &mut impl Read, what: &str) -> Result<i32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b).map_err(|e| io_error(what, e))?;
    Ok(i32::from_le_bytes(b))
}

/// Reads a key: `i32` length then bytes, at most [`MAX_KEY_BYTES`].
pub fn read_key(s: &mut impl Read) -> Result<String> {
    let n = read_i32(s, "key length")?;
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n <= MAX_KEY_BYTES)
        .ok_or_else(|| Error::value_error(format!("RPC handshake: bad key length {n}")))?;
    let mut b = vec![0u8; n];
    s.read_exact(&mut b).map_err(|e| io_error("key", e))?;
    String::from_utf8(b).map_err(|_| Error::value_error("RPC handshake: key is not UTF-8"))
}

/// Writes an `i32` length and the key.
pub fn key_bytes(key: &str) -> Vec<u8> {
    let mut v = (key.len() as i32).to_le_bytes().to_vec();
    v.extend_from_slice(key.as_bytes());
    v
}

/// The client's side of the handshake: sends magic and key, returns the server's key.
pub fn client_handshake(s: &mut (impl Read + Write), key: &str, addr: &str) -> Result<String> {
    let mut out = RPC_MAGIC.to_le_bytes().to_vec();
    out.extend(key_bytes(key));
    s.write_all(&out).map_err(|e| io_error("handshake", e))?;
    let code = read_i32(s, "handshake answer")?;
    match code {
        RPC_CODE_SUCCESS => read_key(s),
        c if c == RPC_MAGIC + 2 => Err(Error::runtime_error(format!(
            "RPC server {addr} refused the key `{key}` (RPC_CODE_MISMATCH)"
        ))),
        c if c == RPC_MAGIC + 1 => Err(Error::runtime_error(format!(
            "RPC server {addr} already has key `{key}` (RPC_CODE_DUPLICATE)"
        ))),
        c => Err(Error::runtime_error(format!(
            "{addr} is not an RPC server (answered {c:#x})"
        ))),
    }
}

/// Reads one packet body (what follows the length) of at most `max` bytes. The buffer grows
/// with the bytes that really arrive, so a length that lies costs no memory. `Ok(None)` is a
/// clean end of stream before a packet starts.
pub fn read_packet(s: &mut impl Read, max: u64) -> Result<Option<Vec<u8>>> {
    let mut len = [0u8; 8];
    let mut got = 0;
    while got < 8 {
        match s.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(Error::runtime_error(
                    "RPC: connection closed inside a length",
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error("read", e)),
        }
    }
    let n = u64::from_le_bytes(len);
    if n > max {
        return Err(Error::value_error(format!(
            "RPC packet of {n} bytes exceeds the limit of {max} bytes"
        )));
    }
    let mut body = Vec::with_capacity(n.min(1 << 20) as usize);
    s.take(n)
        .read_to_end(&mut body)
        .map_err(|e| io_error("read", e))?;
    if body.len() as u64 != n {
        return Err(Error::runtime_error(format!(
            "RPC: connection closed after {} of {n} packet bytes",
            body.len()
        )));
    }
    Ok(Some(body))
}

/// Binds a listener on `host` at the first free port of `[port, port_end)` (`port` 0: any).
pub(crate) fn bind(host: &str, port: u16, port_end: u16) -> Result<std::net::TcpListener> {
    use std::net::TcpListener;
    if port == 0 {
        return TcpListener::bind((host, 0))
            .map_err(|e| Error::runtime_error(format!("cannot bind {host}:0: {e}")));
    }
    let mut last = None;
    for p in port..port_end.max(port + 1) {
        match TcpListener::bind((host, p)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(Error::runtime_error(format!(
        "cannot bind to any port in [{port}, {port_end}) on {host}: {}",
        last.map_or_else(String::new, |e| e.to_string())
    )))
}

/// A thread accepting connections on `addr` until its stop flag is set: what the RPC server
/// and the tracker share. Stopping sets the flag, wakes the blocking accept with a connection
/// of its own and joins the thread; dropping stops.
pub(crate) struct AcceptThread {
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl AcceptThread {
    /// Runs `accept` (which must return once `stop` is set and a connection arrives) in a
    /// thread named `name`.
    pub(crate) fn spawn(
        name: &str,
        addr: std::net::SocketAddr,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
        accept: impl FnOnce() + Send + 'static,
    ) -> Result<AcceptThread> {
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(accept)
            .map_err(|e| Error::runtime_error(format!("{name} thread: {e}")))?;
        Ok(AcceptThread {
            addr,
            stop,
            handle: Some(handle),
        })
    }

    /// The bound address.
    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Stops accepting and joins the thread.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect_timeout(&self.addr, std::time::Duration::from_secs(1));
        self.wait();
    }

    /// Blocks until the thread ends.
    pub(crate) fn wait(&mut self) {
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for AcceptThread {
    fn drop(&mut self) {
        self.stop();
    }
}
