//! Many clients at once, and clients killed mid-call or mid-copy: the server keeps serving and
//! its open file descriptors return to where they started.

mod common;

use kiln_ffi::DataType;
use kiln_runtime::tensor::Tensor;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn fifty_clients_and_killed_clients() {
    let srv = common::server("");
    let port = srv.port();
    // Warm up lazily created state (thread pools, registries) before counting.
    {
        let s = kiln_rpc::connect("127.0.0.1", port, "").unwrap();
        s.function("testing.add_one")
            .unwrap()
            .invoke::<i64>((1i64,))
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while srv.active_sessions() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let fds_before = open_fds();
    let held_before = kiln_rpc::server::held_device_bytes();

    let workers: Vec<_> = (0..50)
        .map(|w| {
            std::thread::spawn(move || {
                let sess = kiln_rpc::connect("127.0.0.1", port, "").unwrap();
                let add = sess.function("testing.add_one").unwrap();
                let echo = sess.function("testing.echo").unwrap();
                for i in 0..300i64 {
                    assert_eq!(
                        add.invoke::<i64>((w * 1000 + i,)).unwrap(),
                        w * 1000 + i + 1
                    );
                    if i % 50 == 0 {
                        let s = format!("worker {w} call {i}");
                        assert_eq!(echo.invoke::<String>((s.as_str(),)).unwrap(), s);
                    }
                }
            })
        })
        .collect();
    // Meanwhile: clients that die mid-call or mid-copy.
    for k in 0..20 {
        let sess = kiln_rpc::connect("127.0.0.1", port, "").unwrap();
        if k % 2 == 0 {
            let dev = sess.cpu(0).unwrap();
            let t = Tensor::empty(&[1 << 16], DataType::float(32), dev).unwrap();
            std::mem::forget(t); // the remote memory is the server's to free
        }
        drop(sess);
        // A raw client: handshake, init, then half of a 4 MB copy, then gone.
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut h = kiln_rpc::protocol::RPC_MAGIC.to_le_bytes().to_vec();
        h.extend(7i32.to_le_bytes());
        h.extend(b"client:");
        s.write_all(&h).unwrap();
        s.write_all(&(4u64 << 20).to_le_bytes()).unwrap();
        s.write_all(&vec![0u8; 1 << 20]).unwrap();
        drop(s);
    }
    for w in workers {
        w.join().unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while srv.active_sessions() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(srv.active_sessions(), 0);
    // Still serving.
    let s = kiln_rpc::connect("127.0.0.1", port, "").unwrap();
    assert_eq!(
        s.function("testing.add_one")
            .unwrap()
            .invoke::<i64>((1i64,))
            .unwrap(),
        2
    );
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(10);
    while (srv.active_sessions() > 0 || open_fds() > fds_before) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(open_fds(), fds_before, "file descriptors leaked");
    assert_eq!(
        kiln_rpc::server::held_device_bytes(),
        held_before,
        "device memory held for gone clients"
    );
}
