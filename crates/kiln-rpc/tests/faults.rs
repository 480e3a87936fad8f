//! Malformed, truncated and oversized packets end only their own session; the server keeps
//! serving others. Also: a deterministic mutation test of the packet decoder and dispatch.

mod common;

use kiln_rpc::codec::{decode_packet, encode_seq_packet, WireValue};
use kiln_rpc::protocol::{code, PROTOCOL_VERSION, RPC_CODE_SUCCESS, RPC_MAGIC};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn handshake(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut h = RPC_MAGIC.to_le_bytes().to_vec();
    h.extend(7i32.to_le_bytes());
    h.extend(b"client:");
    s.write_all(&h).unwrap();
    let mut b = [0u8; 4];
    s.read_exact(&mut b).unwrap();
    assert_eq!(i32::from_le_bytes(b), RPC_CODE_SUCCESS);
    s.read_exact(&mut b).unwrap();
    let mut key = vec![0u8; i32::from_le_bytes(b) as usize];
    s.read_exact(&mut key).unwrap();
    assert_eq!(key, b"server:");
    s
}

fn init_packet() -> Vec<u8> {
    let mut w = kiln_rpc::codec::Writer::packet(code::INIT_SERVER);
    w.len_bytes(PROTOCOL_VERSION.as_bytes());
    w.seq(&[]);
    w.finish()
}

/// Reads until the server closes; true when it did (rather than timing out).
fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

fn still_serves(port: u16) {
    let sess = kiln_rpc::connect("127.0.0.1", port, "").unwrap();
    let f = sess.function("testing.add_one").unwrap();
    assert_eq!(f.invoke::<i64>((9i64,)).unwrap(), 10);
}

#[test]
fn bad_packets_end_only_their_session() {
    let srv = common::server("");
    let port = srv.port();
    let cases: Vec<Vec<u8>> = vec![
        // Unknown packet code.
        {
            let mut p = 8u64.to_le_bytes().to_vec();
            p.extend(99i32.to_le_bytes());
            p.extend(0i32.to_le_bytes());
            p
        },
        // Argument count that lies.
        {
            let mut p = 8u64.to_le_bytes().to_vec();
            p.extend(code::RETURN.to_le_bytes());
            p.extend(i32::MAX.to_le_bytes());
            p
        },
        // A length beyond the limit (2^62 bytes): refused before any allocation.
        {
            let mut p = (1u64 << 62).to_le_bytes().to_vec();
            p.extend([0u8; 16]);
            p
        },
        // A call with a string whose length runs past the packet.
        {
            let mut p =
                encode_seq_packet(code::CALL_FUNC, Some(1), &[WireValue::Str(b"abc".to_vec())]);
            let n = p.len();
            p[n - 11..n - 3].copy_from_slice(&1000u64.to_le_bytes());
            p
        },
        // A tensor with a negative ndim.
        {
            let mut w = kiln_rpc::codec::Writer::packet(code::COPY_FROM_REMOTE);
            w.u64(0);
            w.i32(1);
            w.i32(0);
            w.i32(-3);
            w.i32(0);
            w.finish()
        },
    ];
    for (i, bad) in cases.iter().enumerate() {
        let mut s = handshake(port);
        s.write_all(&init_packet()).unwrap();
        let mut reply = [0u8; 20];
        s.read_exact(&mut reply).unwrap();
        s.write_all(bad).unwrap();
        assert!(closed_by_server(&mut s), "case {i}: the session should end");
        still_serves(port);
    }
    // Truncated: a packet announcing 1000 bytes that stops after 10, then the client leaves.
    let mut s = handshake(port);
    s.write_all(&1000u64.to_le_bytes()).unwrap();
    s.write_all(&[1u8; 10]).unwrap();
    drop(s);
    // Garbage instead of a handshake.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert!(closed_by_server(&mut s));
    // Handles and pointers the server never gave are refused (and the session continues).
    let mut s = handshake(port);
    s.write_all(&init_packet()).unwrap();
    let mut reply = [0u8; 20];
    s.read_exact(&mut reply).unwrap();
    s.write_all(&encode_seq_packet(code::CALL_FUNC, Some(0xdead_beef), &[]))
        .unwrap();
    let body = kiln_rpc::transport::read_packet(&mut s, 1 << 20)
        .unwrap()
        .unwrap();
    match decode_packet(&body).unwrap() {
        kiln_rpc::codec::Packet::Exception(m) => {
            assert!(m.contains("unknown remote handle"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    s.write_all(&encode_seq_packet(
        code::DEV_FREE_DATA,
        None,
        &[
            WireValue::Device(kiln_ffi::Device::cpu(0).0),
            WireValue::OpaquePtr(0x1000),
        ],
    ))
    .unwrap();
    let body = kiln_rpc::transport::read_packet(&mut s, 1 << 20)
        .unwrap()
        .unwrap();
    assert!(matches!(
        decode_packet(&body).unwrap(),
        kiln_rpc::codec::Packet::Exception(_)
    ));
    still_serves(port);
}

#[test]
fn mutated_and_truncated_packets_never_panic() {
    kiln_rpc::link_globals();
    let dir = common::scratch("mutation");
    let seeds: Vec<Vec<u8>> = vec![
        init_packet(),
        encode_seq_packet(
            code::CALL_FUNC,
            Some(1),
            &[WireValue::Int(3), WireValue::Str(b"x".to_vec())],
        ),
        encode_seq_packet(
            code::GET_GLOBAL_FUNC,
            None,
            &[WireValue::Str(b"testing.add_one".to_vec())],
        ),
        encode_seq_packet(
            code::DEV_ALLOC_DATA,
            None,
            &[
                WireValue::Device(kiln_ffi::Device::cpu(0).0),
                WireValue::Int(64),
                WireValue::Int(64),
                WireValue::DataType(kiln_ffi::DataType::float(32).0),
            ],
        ),
        encode_seq_packet(code::RETURN, None, &[WireValue::Bytes(vec![1, 2, 3])]),
    ];
    let mut rng = kiln_testing::rng::Lcg::new(0x9e37_79b9_7f4a_7c15);
    for round in 0..20_000 {
        let seed = &seeds[round % seeds.len()];
        let mut p = seed.clone();
        match rng.mixed_u64() % 4 {
            0 => p.truncate((rng.mixed_u64() as usize) % (p.len() + 1)),
            1 => {
                for _ in 0..1 + rng.mixed_u64() % 4 {
                    let i = (rng.mixed_u64() as usize) % p.len();
                    p[i] = rng.mixed_u64() as u8;
                }
            }
            2 => {
                p = (0..rng.mixed_u64() % 64)
                    .map(|_| rng.mixed_u64() as u8)
                    .collect()
            }
            _ => p.extend((0..rng.mixed_u64() % 16).map(|_| rng.mixed_u64() as u8)),
        }
        if p.len() >= 8 {
            let _ = decode_packet(&p[8..]);
        }
        // Through a whole session: init, then the mutated packet.
        if round % 10 == 0 {
            let mut input = init_packet();
            input.extend(&p);
            let _ = kiln_rpc::server::serve_bytes(&input, &dir);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
