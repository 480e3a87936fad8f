//! Library modules against a C library shaped like Apache TVM's output (see `module_support`):
//! context slots, the library context, import lookups, errors, lifetimes, bad files.

mod module_support;

use kiln_ffi::{Any, Function};
use kiln_runtime::module::{load_module, LibraryModule, Module};
use kiln_testing::error::expect_err;
use module_support::*;
use std::ffi::c_void;

fn callback_global() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        kiln_ffi::registry::register(
            "kiln_test.callback",
            Function::from_typed(|x: i64| x * 2),
            true,
        )
        .unwrap();
    });
}

#[test]
fn calls_functions_with_self_null_and_reports_c_errors() {
    let dir = Scratch::new("basic");
    let path = fake_tvm_library(&dir, "basic.so", "");
    let m = load_module(&path).unwrap();
    assert_eq!(m.kind(), "library");
    assert!(m.imports().is_empty());
    let add_one = m.function("add_one").unwrap();
    assert_eq!(add_one.invoke::<i64>((41i64,)).unwrap(), 42);
    let e = expect_err(add_one.invoke::<i64>(("x",)), "TypeError", "");
    assert_eq!(e.message(), "add_one: expected one int argument");
    let e = expect_err(
        m.function("raise_value_error").unwrap().invoke::<i64>(()),
        "ValueError",
        "",
    );
    assert_eq!(e.message(), "raised through the context slot");
    // Data symbols with the prefix are never handed out as functions.
    assert!(m.get_function("not_a_function", false).unwrap().is_none());
    assert!(m.get_function("_library_ctx", false).unwrap().is_none());
    assert!(m.get_function("missing", true).unwrap().is_none());
    let names = m.downcast_node::<LibraryModule>().unwrap().function_names();
    assert!(names.contains(&"add_one".to_string()), "{names:?}");
    assert!(!names.contains(&"not_a_function".to_string()), "{names:?}");
}

#[test]
fn workspace_and_parallel_slots_work() {
    let dir = Scratch::new("backend");
    let m = load_module(fake_tvm_library(&dir, "backend.so", "")).unwrap();
    let sum = m.function("workspace_sum").unwrap();
    assert_eq!(sum.invoke::<f64>((1000i64,)).unwrap(), 499500.0);
    let mut out = vec![0i64; 64];
    let fill = m.function("parallel_fill").unwrap();
    let rc = fill
        .invoke::<i64>((out.as_mut_ptr() as *mut c_void,))
        .unwrap();
    assert_eq!(rc, 0);
    let n = out[63] as usize;
    assert!(n >= 1, "num_task {n}");
    for (i, v) in out.iter().enumerate().take(n) {
        assert_eq!(*v, i as i64 + 1);
    }
}

#[test]
fn call_packed_resolves_through_the_library_context() {
    callback_global();
    let dir = Scratch::new("ctx");
    // Global registry when nothing is imported.
    let m = load_module(fake_tvm_library(&dir, "global.so", "")).unwrap();
    let f = m.function("call_callback").unwrap();
    assert_eq!(f.invoke::<i64>((21i64,)).unwrap(), 42);
    // Imports win over the global registry (a second file: its own statics).
    register_test_kind();
    let m2 = load_module(fake_tvm_library(&dir, "imports.so", "")).unwrap();
    m2.import(&Module::new(BlobNode { payload: vec![] }))
        .unwrap();
    let f2 = m2.function("call_callback").unwrap();
    assert_eq!(f2.invoke::<i64>((3i64,)).unwrap(), 3000);
    // Cached for the life of the code: still the import's function.
    assert_eq!(f2.invoke::<i64>((4i64,)).unwrap(), 4000);
}

#[test]
fn functions_keep_the_library_alive_and_the_context_is_reset() {
    callback_global();
    let dir = Scratch::new("life");
    let path = fake_tvm_library(&dir, "life.so", "");
    let m = load_module(&path).unwrap();
    let add_one = m.function("add_one").unwrap();
    let call = m.function("call_callback").unwrap();
    drop(m);
    // The module is gone: its functions still run, and name lookups see only globals.
    assert_eq!(add_one.invoke::<i64>((1i64,)).unwrap(), 2);
    assert_eq!(call.invoke::<i64>((5i64,)).unwrap(), 10);
}

#[test]
fn loading_one_file_twice_shares_the_library() {
    let dir = Scratch::new("twice");
    let path = fake_tvm_library(&dir, "twice.so", "");
    let a = load_module(&path).unwrap();
    let b = load_module(&path).unwrap();
    let la = a
        .downcast_node::<LibraryModule>()
        .unwrap()
        .library()
        .clone();
    let lb = b
        .downcast_node::<LibraryModule>()
        .unwrap()
        .library()
        .clone();
    assert!(std::sync::Arc::ptr_eq(&la, &lb));
    drop(a);
    assert_eq!(
        b.function("add_one")
            .unwrap()
            .invoke::<i64>((9i64,))
            .unwrap(),
        10
    );
}

// Linking `.o` and `.tar` files at load time needs the `compiler` feature.
#[cfg(feature = "compiler")]
#[test]
fn objects_and_archives_are_linked_on_load() {
    let dir = Scratch::new("link");
    let obj = dir.path("kernel.o");
    cc(&obj, FAKE_TVM_LIBRARY, &["-c", "-fPIC"]);
    let m = load_module(&obj).unwrap();
    assert_eq!(
        m.function("add_one")
            .unwrap()
            .invoke::<i64>((1i64,))
            .unwrap(),
        2
    );
    let tar = dir.path("kernels.tar");
    let st = std::process::Command::new("tar")
        .arg("-cf")
        .arg(&tar)
        .arg("-C")
        .arg(&dir.0)
        .arg("kernel.o")
        .status()
        .unwrap();
    assert!(st.success());
    let m = load_module(&tar).unwrap();
    assert_eq!(
        m.function("add_one")
            .unwrap()
            .invoke::<i64>((2i64,))
            .unwrap(),
        3
    );
}

// Linking `.o` and `.tar` files at load time needs the `compiler` feature.
#[cfg(feature = "compiler")]
#[test]
fn bad_files_give_errors_that_name_the_path() {
    let dir = Scratch::new("bad");
    let missing = dir.path("missing.so");
    let e = load_module(&missing).unwrap_err();
    assert!(e.message().contains("missing.so"), "{e}");

    let garbage = dir.path("garbage.so");
    std::fs::write(&garbage, b"this is not a shared library").unwrap();
    let e = load_module(&garbage).unwrap_err();
    assert!(e.message().contains("garbage.so"), "{e}");

    let plain = dir.path("plain.so");
    cc_shared(&plain, "int just_a_function(void) { return 1; }\n");
    let e = load_module(&plain).unwrap_err();
    assert!(e.message().contains("plain.so"), "{e}");
    assert!(e.message().contains("not a Kiln/TVM module"), "{e}");

    let unknown = dir.path("model.xyz");
    std::fs::write(&unknown, b"x").unwrap();
    let e = load_module(&unknown).unwrap_err();
    assert!(e.message().contains("ffi.Module.load_from_file.xyz"), "{e}");

    let bad_obj = dir.path("bad.o");
    std::fs::write(&bad_obj, b"not an object").unwrap();
    let e = load_module(&bad_obj).unwrap_err();
    assert!(e.message().contains("bad.o"), "{e}");
    assert!(e.message().contains("-shared"), "shows the command: {e}");

    let e = load_module(&dir.0).unwrap_err();
    assert!(e.message().contains("not a file"), "{e}");
}

/// A small deterministic generator (xorshift64) for garbage bytes.
fn garbage(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

#[test]
fn truncated_and_garbage_libraries_are_errors_not_crashes() {
    let dir = Scratch::new("truncated");
    // A table in read-only data makes the loaded segments span most of the file.
    let whole = fake_tvm_library(
        &dir,
        "whole.so",
        "const char kiln_test_table[1 << 16] = {1};",
    );
    let bytes = std::fs::read(&whole).unwrap();
    load_module(&whole).unwrap();
    // Without the check, dlopen maps these and the process dies with SIGBUS.
    for k in 0..16 {
        let cut = bytes.len() * k / 16;
        let name = format!("cut{k}.so");
        let path = dir.path(&name);
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let e = load_module(&path).unwrap_err();
        assert!(e.message().contains(&name), "{e}");
        if cut >= 64 {
            let has = format!("but the file has {cut} bytes");
            assert!(e.message().contains(&has), "{e}");
            assert_eq!(e.kind(), "ValueError", "{e}");
        }
    }
    let e = load_module(dir.path("cut1.so")).unwrap_err();
    assert!(e.message().contains("truncated"), "{e}");
    assert!(e.message().contains("segment #"), "{e}");
    // Garbage after an ELF magic, after a whole ELF64 identification, after the real header.
    for seed in 1..=16u64 {
        let mut after_magic = b"\x7fELF".to_vec();
        after_magic.extend(garbage(bytes.len(), seed));
        let mut after_ident = b"\x7fELF\x02\x01\x01".to_vec();
        after_ident.extend(garbage(bytes.len(), seed));
        let mut after_header = bytes[..64].to_vec();
        after_header.extend(garbage(bytes.len() - 64, seed));
        for (kind, image) in [
            ("magic", after_magic),
            ("ident", after_ident),
            ("header", after_header),
        ] {
            let name = format!("garbage-{kind}-{seed}.so");
            let path = dir.path(&name);
            std::fs::write(&path, &image).unwrap();
            let e = load_module(&path).unwrap_err();
            assert!(e.message().contains(&name), "{e}");
        }
    }
    // The C entry point goes the same way.
    let load = kiln_ffi::registry::get_required("ffi.ModuleLoadFromFile").unwrap();
    let path = dir.path("cut8.so").display().to_string();
    let e = load.invoke::<Module>((path,)).unwrap_err();
    assert!(e.message().contains("cut8.so"), "{e}");
}

#[test]
fn lookup_from_imports_rejects_bad_arguments() {
    use kiln_runtime::module::TVMFFIEnvModLookupFromImports;
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: NULL name is reported as an error.
    let rc =
        unsafe { TVMFFIEnvModLookupFromImports(std::ptr::null_mut(), std::ptr::null(), &mut out) };
    assert_eq!(rc, -1);
    let e = kiln_ffi::error::take_raised("lookup");
    assert!(e.message().contains("NULL"), "{e}");
    // A non-module object as context.
    let s: Any = kiln_ffi::Str::new("definitely not a module").into();
    let ptr = s.view().object_ptr().unwrap().as_ptr() as *mut c_void;
    // SAFETY: a live object and a valid name.
    let rc = unsafe { TVMFFIEnvModLookupFromImports(ptr, c"testing.add_one".as_ptr(), &mut out) };
    assert_eq!(rc, -1);
    let e = kiln_ffi::error::take_raised("lookup");
    assert!(e.message().contains("ffi.Module"), "{e}");
    // NULL context: the global registry.
    // SAFETY: valid name and out slot.
    let rc = unsafe {
        TVMFFIEnvModLookupFromImports(
            std::ptr::null_mut(),
            c"runtime.DeviceGetAttr".as_ptr(),
            &mut out,
        )
    };
    assert_eq!(rc, 0);
    assert!(!out.is_null());
}

#[test]
fn reloading_after_unload_never_uses_a_stale_handle() {
    callback_global();
    register_test_kind();
    let dir = Scratch::new("reload");
    let path = fake_tvm_library(&dir, "reload.so", "");
    for round in 0..3 {
        let m = load_module(&path).unwrap();
        m.import(&Module::new(BlobNode { payload: vec![] }))
            .unwrap();
        let f = m.function("call_callback").unwrap();
        // Unloaded in between: fresh statics resolve through the import again (x * 1000). Kept
        // mapped: the functions resolved before were kept alive for the old statics.
        assert_eq!(f.invoke::<i64>((round,)).unwrap(), round * 1000);
        drop((m, f));
    }
}
