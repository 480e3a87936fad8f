//! Kiln client against Kiln server over loopback: calls, errors, tensors, modules, keys, paths.

mod common;

use kiln_ffi::{Any, Bytes, DataType, Device};
use kiln_rpc::connect;
use kiln_runtime::tensor::Tensor;

#[test]
fn remote_global_calls_return_their_values() {
    let srv = common::server("");
    let sess = connect("127.0.0.1", srv.port(), "").unwrap();
    let add = sess.function("testing.add_one").unwrap();
    assert_eq!(add.invoke::<i64>((41i64,)).unwrap(), 42);
    let echo = sess.function("testing.echo").unwrap();
    assert_eq!(
        echo.invoke::<String>(("héllo wörld",)).unwrap(),
        "héllo wörld"
    );
    assert_eq!(echo.invoke::<f64>((2.5f64,)).unwrap(), 2.5);
    assert!(echo.invoke::<bool>((true,)).unwrap());
    let b: Bytes = echo
        .invoke((Any::from_bytes_slice(&[0u8, 1, 2, 255]),))
        .unwrap();
    assert_eq!(b.as_bytes(), &[0u8, 1, 2, 255]);
    let dt: DataType = echo.invoke((DataType::float(16),)).unwrap();
    assert_eq!(dt, DataType::float(16));
    assert!(sess.get_function("no.such.function").unwrap().is_none());
    // The session module hands out the same functions.
    let f = sess.module().function("testing.add_one").unwrap();
    assert_eq!(f.invoke::<i64>((1i64,)).unwrap(), 2);
}

#[test]
fn remote_errors_arrive_with_the_remote_message() {
    let srv = common::server("");
    let sess = connect("127.0.0.1", srv.port(), "").unwrap();
    let raise = sess.function("testing.test_raise_error").unwrap();
    let e = raise
        .invoke::<()>(("ValueError", "the remote says no"))
        .unwrap_err();
    assert_eq!(e.kind(), "ValueError");
    assert!(
        e.message().contains("the remote says no"),
        "{}",
        e.message()
    );
    // The session keeps working after an error.
    let add = sess.function("testing.add_one").unwrap();
    assert_eq!(add.invoke::<i64>((1i64,)).unwrap(), 2);
    let e = add.invoke::<i64>(("not an int",)).unwrap_err();
    assert!(e.message().contains("int"), "{}", e.message());
}

#[test]
fn tensors_round_trip_through_remote_memory() {
    let srv = common::server("");
    let sess = connect("127.0.0.1", srv.port(), "").unwrap();
    let dev = sess.cpu(0).unwrap();
    assert!(dev.device_type() >= 128);
    let data: Vec<f32> = (0..10_000).map(|i| (i as f32) * 0.25 - 7.0).collect();
    let local = Tensor::from_slice(&data, &[100, 100]).unwrap();
    let remote = Tensor::empty(&[100, 100], DataType::float(32), dev).unwrap();
    remote.copy_from(&local).unwrap();
    let back = Tensor::from_slice(&vec![f32::NAN; 10_000], &[100, 100]).unwrap();
    back.copy_from(&remote).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), data);
    // Remote to remote within the session.
    let other = Tensor::empty(&[100, 100], DataType::float(32), dev).unwrap();
    other.copy_from(&remote).unwrap();
    let back2 = Tensor::from_slice(&vec![f32::NAN; 10_000], &[100, 100]).unwrap();
    back2.copy_from(&other).unwrap();
    assert_eq!(back2.to_vec::<f32>().unwrap(), data);
}

#[test]
fn uploaded_library_runs_remotely_and_times() {
    let dir = common::scratch("upload");
    let lib = common::build_add_one(&dir);
    let srv = common::server("");
    let sess = connect("127.0.0.1", srv.port(), "").unwrap();
    sess.upload(&lib, None).unwrap();
    assert_eq!(
        sess.download("add_one.so").unwrap(),
        std::fs::read(&lib).unwrap()
    );
    let m = sess.load_module("add_one.so").unwrap();
    assert_eq!(m.kind(), "rpc");
    let f = m.function("add_one").unwrap();
    let dev = sess.cpu(0).unwrap();
    let x: Vec<f32> = (0..257).map(|i| i as f32 * 1.5).collect();
    let a = Tensor::empty(&[257], DataType::float(32), dev).unwrap();
    a.copy_from(&Tensor::from_slice(&x, &[257]).unwrap())
        .unwrap();
    let b = Tensor::empty(&[257], DataType::float(32), dev).unwrap();
    b.copy_from(&Tensor::from_slice(&vec![f32::NAN; 257], &[257]).unwrap())
        .unwrap();
    f.invoke::<()>((a.clone(), b.clone())).unwrap();
    let out = Tensor::from_slice(&vec![0f32; 257], &[257]).unwrap();
    out.copy_from(&b).unwrap();
    let expect: Vec<f32> = x.iter().map(|v| v + 1.0).collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), expect);
    assert!(m.get_function("missing", false).unwrap().is_none());
    // A local tensor is refused with a clear message.
    let e = f
        .invoke::<()>((Tensor::from_slice(&x, &[257]).unwrap(), b.clone()))
        .unwrap_err();
    assert!(e.message().contains("local device"), "{}", e.message());
    // The time evaluator runs on the server.
    let opts = kiln_runtime::time_evaluator::TimeEvaluatorOptions {
        number: 5,
        repeat: 3,
        ..Default::default()
    };
    let te = sess
        .time_evaluator(Some(&m), "add_one", dev, &opts)
        .unwrap();
    let times: Bytes = te.invoke((a, b)).unwrap();
    assert_eq!(times.as_bytes().len(), 3 * 8);
    for c in times.as_bytes().chunks(8) {
        let t = f64::from_ne_bytes(c.try_into().unwrap());
        assert!(t > 0.0 && t < 0.1, "{t}");
    }
    sess.remove("add_one.so").unwrap();
    assert!(sess.download("add_one.so").is_err());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_wrong_key_is_refused_at_the_handshake() {
    let srv = common::server("s3cret");
    let e = connect("127.0.0.1", srv.port(), "").err().expect("refused");
    assert!(e.message().contains("MISMATCH"), "{}", e.message());
    let e = connect("127.0.0.1", srv.port(), "wrong")
        .err()
        .expect("refused");
    assert!(e.message().contains("MISMATCH"), "{}", e.message());
    let sess = connect("127.0.0.1", srv.port(), "s3cret").unwrap();
    assert_eq!(
        sess.function("testing.add_one")
            .unwrap()
            .invoke::<i64>((1i64,))
            .unwrap(),
        2
    );
}

#[test]
fn uploads_stay_inside_the_session_folder() {
    let srv = common::server("");
    let sess = connect("127.0.0.1", srv.port(), "").unwrap();
    let outside = std::env::temp_dir().join(format!("kiln-rpc-escape-{}", std::process::id()));
    let abs = outside.to_string_lossy().into_owned();
    for bad in ["../escape", "a/b", &abs, "..", "", "x/../../y"] {
        let e = sess.upload_bytes(bad, b"data").unwrap_err();
        assert!(
            e.message().contains("refused path"),
            "{bad}: {}",
            e.message()
        );
        assert!(sess.download(bad).is_err());
        assert!(sess.load_module(bad).is_err());
    }
    assert!(!outside.exists());
    sess.upload_bytes("fine.bin", b"data").unwrap();
    assert_eq!(sess.download("fine.bin").unwrap(), b"data");
}

#[test]
fn remote_memory_is_checked_against_the_session() {
    let srv = common::server("");
    let sess = connect("127.0.0.1", srv.port(), "").unwrap();
    let dev = sess.cpu(0).unwrap();
    let t = Tensor::empty(&[16], DataType::float(32), dev).unwrap();
    // A view claiming more bytes than were allocated is refused by the server.
    let big = t.view(&[1024], DataType::float(32));
    if let Ok(big) = big {
        let local = Tensor::from_slice(&vec![0f32; 1024], &[1024]).unwrap();
        assert!(local.copy_from(&big).is_err());
    }
    let _ = Device::cpu(0);
}

#[test]
fn sessions_end_at_the_timeout_their_client_asked_for() {
    let srv = common::server("");
    assert_eq!(
        kiln_rpc::server::session_timeout("client: -timeout=1.5"),
        Some(std::time::Duration::from_millis(1500))
    );
    assert_eq!(kiln_rpc::server::session_timeout("client:k"), None);
    assert_eq!(
        kiln_rpc::server::session_timeout("client: -timeout=-3"),
        None
    );
    // TVM's client appends ` -timeout=S` to the key; the key proper is still empty here.
    let sess = connect("127.0.0.1", srv.port(), " -timeout=0.5").unwrap();
    let add = sess.function("testing.add_one").unwrap();
    assert_eq!(add.invoke::<i64>((1i64,)).unwrap(), 2);
    std::thread::sleep(std::time::Duration::from_millis(1200));
    assert!(
        add.invoke::<i64>((1i64,)).is_err(),
        "the server ended the session after its time limit"
    );
    // Sessions without a limit are untouched, and the server keeps serving.
    let other = connect("127.0.0.1", srv.port(), "").unwrap();
    let f = other.function("testing.add_one").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert_eq!(f.invoke::<i64>((2i64,)).unwrap(), 3);
}
