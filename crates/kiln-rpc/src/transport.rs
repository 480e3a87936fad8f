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
