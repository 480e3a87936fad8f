//! `export_library` then `load_module`: the import tree and the payloads come back intact.
// export_library needs the `compiler` feature.
#![cfg(feature = "compiler")]

mod module_support;

use kiln_runtime::module::{export_library, load_module, ExportOptions, Module};
use module_support::*;

fn blob(payload: &[u8]) -> Module {
    Module::new(BlobNode {
        payload: payload.to_vec(),
    })
}

fn c_module(name: &str, value: i64) -> Module {
    Module::new(CSourceNode {
        name: name.into(),
        value,
        source_override: None,
    })
}

#[test]
fn library_root_with_two_serialized_imports_round_trips() {
    register_test_kind();
    let dir = Scratch::new("export-lib");
    let root = c_module("answer", 42);
    let (a, b) = (blob(b"first"), blob(&[0u8, 255, 7, 0, 1]));
    root.import(&a).unwrap();
    root.import(&b).unwrap();
    let path = dir.path("tree.so");
    export_library(&root, &path, &ExportOptions::default()).unwrap();

    let loaded = load_module(&path).unwrap();
    assert_eq!(loaded.kind(), "library");
    let imports = loaded.imports();
    assert_eq!(imports.len(), 2);
    assert!(imports.iter().all(|m| m.kind() == TEST_KIND));
    assert_eq!(payload_of(&imports[0]), b"first");
    assert_eq!(payload_of(&imports[1]), [0u8, 255, 7, 0, 1]);
    let answer = loaded.function("answer").unwrap();
    assert_eq!(answer.invoke::<i64>(()).unwrap(), 42);
}

#[test]
fn serialized_root_and_shared_imports_round_trip() {
    register_test_kind();
    let dir = Scratch::new("export-root");
    // root -> a -> c, root -> b -> c: c is serialized once and imported twice.
    let (root, a, b, c) = (blob(b"root"), blob(b"a"), blob(b"b"), blob(b"c"));
    a.import(&c).unwrap();
    b.import(&c).unwrap();
    root.import(&a).unwrap();
    root.import(&b).unwrap();
    let path = dir.path("systemless.so");
    export_library(&root, &path, &ExportOptions::default()).unwrap();

    let loaded = load_module(&path).unwrap();
    assert_eq!(loaded.kind(), TEST_KIND);
    assert_eq!(payload_of(&loaded), b"root");
    let imports = loaded.imports();
    assert_eq!(
        imports.iter().map(payload_of).collect::<Vec<_>>(),
        [b"a".to_vec(), b"b".to_vec()]
    );
    let (ca, cb) = (&imports[0].imports()[0], &imports[1].imports()[0]);
    assert_eq!(payload_of(ca), b"c");
    assert!(ca.0.same_as(&cb.0), "a shared import stays shared");
}

#[test]
fn single_library_without_imports_needs_no_blob_and_tar_works() {
    let dir = Scratch::new("export-single");
    let root = c_module("seven", 7);
    let so = dir.path("single.so");
    export_library(&root, &so, &ExportOptions::default()).unwrap();
    let m = load_module(&so).unwrap();
    assert_eq!(m.function("seven").unwrap().invoke::<i64>(()).unwrap(), 7);

    let tar = dir.path("single.tar");
    export_library(&root, &tar, &ExportOptions::default()).unwrap();
    let m = load_module(&tar).unwrap();
    assert_eq!(m.function("seven").unwrap().invoke::<i64>(()).unwrap(), 7);
}

#[test]
fn exported_library_records_libm() {
    let dir = Scratch::new("export-libm");
    let root = Module::new(CSourceNode {
        name: "exp_of_one".into(),
        value: 0,
        source_override: Some(
            "#include <math.h>\n#include <stdint.h>\n\
             typedef struct { int32_t t; uint32_t s; double v; } Any;\n\
             volatile float one = 1.0f;\n\
             int __tvm_ffi_exp_of_one(void* self, const Any* a, int32_t n, Any* r) {\n\
             r->t = 3; r->s = 0; r->v = expf(one); return 0; }\n"
                .into(),
        ),
    });
    let so = dir.path("uses_expf.so");
    export_library(&root, &so, &ExportOptions::default()).unwrap();
    let needed = kiln_runtime::module::elf::needed_libraries_of_file(&so).unwrap();
    assert!(
        needed.iter().any(|n| n.starts_with("libm.so")),
        "{} does not record libm: NEEDED {needed:?}",
        so.display()
    );
    let m = load_module(&so).unwrap();
    let e = m.function("exp_of_one").unwrap().invoke::<f64>(()).unwrap();
    assert!((e - std::f64::consts::E).abs() < 1e-6, "{e}");
}

#[test]
fn export_errors_are_clear() {
    register_test_kind();
    let dir = Scratch::new("export-bad");
    let root = c_module("x", 1);
    let e = export_library(&root, dir.path("lib.txt"), &ExportOptions::default()).unwrap_err();
    assert!(e.message().contains("lib.txt"), "{e}");
    assert!(e.message().contains(".so"), "{e}");

    let broken = Module::new(CSourceNode {
        name: "broken".into(),
        value: 0,
        source_override: Some("this is not C;\n".into()),
    });
    let e = export_library(&broken, dir.path("broken.so"), &ExportOptions::default()).unwrap_err();
    assert!(
        e.message().contains("-shared -fPIC"),
        "shows the command: {e}"
    );
    assert!(
        e.message().contains("lib0.c"),
        "shows the compiler output: {e}"
    );

    // A loaded library cannot be linked again.
    let loaded = {
        let so = dir.path("once.so");
        export_library(&root, &so, &ExportOptions::default()).unwrap();
        load_module(&so).unwrap()
    };
    loaded.import(&blob(b"z")).unwrap();
    let e = export_library(&loaded, dir.path("twice.so"), &ExportOptions::default()).unwrap_err();
    assert!(e.message().contains("once.so"), "{e}");

    // Options reach the compiler; workspace_dir keeps the intermediate files.
    let work = dir.path("work");
    let opts = ExportOptions {
        cc_options: vec!["-O2".into()],
        workspace_dir: Some(work.clone()),
    };
    let tree = c_module("y", 2);
    tree.import(&blob(b"p")).unwrap();
    export_library(&tree, dir.path("opts.so"), &opts).unwrap();
    assert!(work.join("devc.S").exists() && work.join("devc.bin").exists());
    assert!(work.join("lib0.c").exists());
}
