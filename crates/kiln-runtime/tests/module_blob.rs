//! Libraries that carry a blob of serialized modules: both layouts, both symbol names, and blobs
//! that are truncated, corrupt or hold a kind nobody can load.

mod module_support;

use kiln_runtime::module::blob::{self, BlobModule, LibraryBin};
use kiln_runtime::module::load_module;
use module_support::*;

fn tree() -> LibraryBin {
    LibraryBin::from_children(
        vec![
            BlobModule::Lib,
            BlobModule::Serialized {
                kind: TEST_KIND.into(),
                payload: b"alpha".to_vec(),
            },
            BlobModule::Serialized {
                kind: TEST_KIND.into(),
                payload: (0..=255).collect(),
            },
        ],
        &[vec![1, 2], vec![], vec![]],
    )
}

#[test]
fn both_layouts_and_symbol_names_restore_the_tree() {
    register_test_kind();
    let dir = Scratch::new("layouts");
    for (i, (symbol, bytes)) in [
        ("__tvm_ffi__library_bin", blob::write(&tree())),
        ("__tvm_ffi__library_bin", blob::write_legacy(&tree())),
        ("__tvm_dev_mblob", blob::write_legacy(&tree())),
    ]
    .into_iter()
    .enumerate()
    {
        let path = fake_tvm_library(&dir, &format!("l{i}.so"), &byte_array_c(symbol, &bytes));
        let root = load_module(&path).unwrap();
        assert_eq!(root.kind(), "library", "case {i}");
        let imports = root.imports();
        assert_eq!(imports.len(), 2, "case {i}");
        assert_eq!(imports[0].kind(), TEST_KIND);
        assert_eq!(payload_of(&imports[0]), b"alpha");
        assert_eq!(payload_of(&imports[1]), (0..=255).collect::<Vec<u8>>());
        // The library's own functions still work, and imports are searched.
        assert_eq!(
            root.function("add_one")
                .unwrap()
                .invoke::<i64>((1i64,))
                .unwrap(),
            2
        );
        assert!(root.get_function("payload", true).unwrap().is_some());
        assert!(root.get_function("payload", false).unwrap().is_none());
    }
}

#[test]
fn a_serialized_root_imports_the_library() {
    register_test_kind();
    let dir = Scratch::new("root");
    let bin = LibraryBin::from_children(
        vec![
            BlobModule::Serialized {
                kind: TEST_KIND.into(),
                payload: b"root".to_vec(),
            },
            BlobModule::Lib,
        ],
        &[vec![1], vec![]],
    );
    let extra = byte_array_c("__tvm_ffi__library_bin", &blob::write(&bin));
    let root = load_module(fake_tvm_library(&dir, "root.so", &extra)).unwrap();
    assert_eq!(root.kind(), TEST_KIND);
    assert_eq!(payload_of(&root), b"root");
    assert_eq!(root.imports()[0].kind(), "library");
    let add_one = root.function("add_one").unwrap();
    assert_eq!(add_one.invoke::<i64>((5i64,)).unwrap(), 6);
}

#[test]
fn unknown_kind_is_named_in_the_error() {
    let dir = Scratch::new("unknown");
    let bin = LibraryBin::from_children(
        vec![
            BlobModule::Serialized {
                kind: "relax.VMExecutable".into(),
                payload: vec![1, 2, 3],
            },
            BlobModule::Lib,
        ],
        &[vec![1], vec![]],
    );
    let extra = byte_array_c("__tvm_ffi__library_bin", &blob::write(&bin));
    let path = fake_tvm_library(&dir, "vm.so", &extra);
    let e = load_module(&path).unwrap_err();
    assert!(e.message().contains("`relax.VMExecutable`"), "{e}");
    assert!(e.message().contains("vm.so"), "{e}");
    assert!(
        e.message()
            .contains("ffi.Module.load_from_bytes.relax.VMExecutable"),
        "{e}"
    );
}

#[test]
fn truncated_and_corrupt_blobs_are_errors_with_offsets() {
    register_test_kind();
    let dir = Scratch::new("corrupt");
    let good = blob::write(&tree());
    // The symbol is shorter than its nbytes prefix says: caught by the symbol's recorded size.
    let short = &good[..good.len() - 10];
    let path = fake_tvm_library(
        &dir,
        "short.so",
        &byte_array_c("__tvm_ffi__library_bin", short),
    );
    let e = load_module(&path).unwrap_err();
    assert!(e.message().contains("short.so"), "{e}");
    assert!(e.message().contains("byte offset 0"), "{e}");

    // A payload length that runs past the end of the blob.
    let mut corrupt = good.clone();
    let at = corrupt.len() - 256 - 8;
    corrupt[at..at + 8].copy_from_slice(&10_000u64.to_le_bytes());
    let path = fake_tvm_library(
        &dir,
        "corrupt.so",
        &byte_array_c("__tvm_ffi__library_bin", &corrupt),
    );
    let e = load_module(&path).unwrap_err();
    assert!(e.message().contains(&format!("byte offset {at}")), "{e}");

    // A symbol too small to hold the size prefix.
    let path = fake_tvm_library(
        &dir,
        "tiny.so",
        &byte_array_c("__tvm_ffi__library_bin", &[1, 2, 3]),
    );
    let e = load_module(&path).unwrap_err();
    assert!(e.message().contains("tiny.so"), "{e}");
}

#[test]
fn mutated_blobs_never_panic() {
    // A cheap stand-in for the cargo-fuzz target (crates/kiln-runtime/fuzz): flip, drop and
    // overwrite bytes of valid blobs of both layouts; parsing must fail cleanly or round-trip.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for base in [blob::write(&tree()), blob::write_legacy(&tree())] {
        for _ in 0..3000 {
            let mut b = base.clone();
            for _ in 0..(next() % 4 + 1) {
                let i = (next() as usize) % b.len();
                match next() % 3 {
                    0 => b[i] ^= 1 << (next() % 8),
                    1 => b[i] = (next() % 256) as u8,
                    _ => b.truncate(i.max(1)),
                }
            }
            if let Ok(bin) = blob::parse(&b) {
                assert_eq!(blob::parse(&blob::write(&bin)).unwrap(), bin);
            }
        }
    }
}
