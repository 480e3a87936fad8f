//! Shared helpers of the module tests: a scratch directory, the C compiler, a C library that
//! behaves like one compiled by Apache TVM (context slots, library context, error parts), and a
//! serializable test module kind.
#![allow(dead_code)]

use kiln_ffi::{Bytes, Function, Result};
use kiln_runtime::module::{Module, ModuleNode};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;

/// A scratch directory removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kiln-module-test-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compiles C source `src` with `cc` and `args` into `out`; panics with the compiler output.
pub fn cc(out: &Path, src: &str, args: &[&str]) {
    let c = out.with_extension("c");
    std::fs::write(&c, src).unwrap();
    let o = Command::new("cc")
        .args(args)
        .arg("-o")
        .arg(out)
        .arg(&c)
        .output()
        .expect("cc runs");
    assert!(
        o.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Compiles `src` into the shared library `out`.
pub fn cc_shared(out: &Path, src: &str) {
    cc(out, src, &["-shared", "-fPIC", "-O1"]);
}

/// A library shaped like Apache TVM's output: `__tvm_ffi_<name>` safe-call functions, the eight
/// context slots, `__tvm_ffi__library_ctx`, and errors through
/// `TVMFFIErrorSetRaisedFromCStrParts` (its only import).
pub const FAKE_TVM_LIBRARY: &str = include_str!("fake_tvm_library.c");

/// Builds [`FAKE_TVM_LIBRARY`] (plus `extra` C code) into `dir/name`.
pub fn fake_tvm_library(dir: &Scratch, name: &str, extra: &str) -> PathBuf {
    let out = dir.path(name);
    cc_shared(&out, &format!("{FAKE_TVM_LIBRARY}\n{extra}"));
    out
}

/// The kind of [`BlobNode`].
pub const TEST_KIND: &str = "kiln_test.blob";

/// A serializable test module: its payload, a `payload` function returning it, and a function
/// named `<tag>_name` for import-search tests.
pub struct BlobNode {
    pub payload: Vec<u8>,
}

impl ModuleNode for BlobNode {
    fn kind(&self) -> &str {
        TEST_KIND
    }
    fn get_function(&self, name: &str) -> Result<Option<Function>> {
        let payload = self.payload.clone();
        Ok(match name {
            "payload" => Some(Function::from_typed(move || Bytes::from_bytes(&payload).0)),
            "kiln_test.callback" => Some(Function::from_typed(move |x: i64| x * 1000)),
            _ => None,
        })
    }
    fn is_binary_serializable(&self) -> bool {
        true
    }
    fn save_to_bytes(&self) -> Result<Vec<u8>> {
        Ok(self.payload.clone())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Registers `ffi.Module.load_from_bytes.kiln_test.blob` once.
pub fn register_test_kind() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        kiln_ffi::registry::register(
            &format!("ffi.Module.load_from_bytes.{TEST_KIND}"),
            Function::from_typed(|b: Vec<u8>| Module::new(BlobNode { payload: b })),
            true,
        )
        .unwrap();
    });
}

/// A module that exports by writing C source (like a C codegen module would): it defines
/// `__tvm_ffi_<name>` returning `value`.
pub struct CSourceNode {
    pub name: String,
    pub value: i64,
    pub source_override: Option<String>,
}

impl CSourceNode {
    pub fn source(&self) -> String {
        self.source_override.clone().unwrap_or_else(|| {
            format!(
                "#include <stdint.h>\n\
                 typedef struct {{ int32_t t; uint32_t s; int64_t v; }} Any;\n\
                 int __tvm_ffi_{}(void* self, const Any* a, int32_t n, Any* r) {{\n\
                 r->t = 1; r->s = 0; r->v = {}; return 0; }}\n",
                self.name, self.value
            )
        })
    }
}

impl ModuleNode for CSourceNode {
    fn kind(&self) -> &str {
        "c"
    }
    fn get_function(&self, _name: &str) -> Result<Option<Function>> {
        Ok(None)
    }
    fn write_formats(&self) -> Vec<String> {
        vec!["c".into()]
    }
    fn write_to_file(&self, path: &Path, _format: &str) -> Result<()> {
        std::fs::write(path, self.source())
            .map_err(|e| kiln_ffi::Error::runtime_error(e.to_string()))
    }
    fn inspect_source(&self, _format: &str) -> Result<String> {
        Ok(self.source())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A C file defining `symbol` as a byte array holding `bytes`.
pub fn byte_array_c(symbol: &str, bytes: &[u8]) -> String {
    let body: Vec<String> = bytes.iter().map(|b| format!("{b}")).collect();
    format!(
        "const unsigned char {symbol}[{}] = {{{}}};\n",
        bytes.len().max(1),
        if bytes.is_empty() {
            "0".into()
        } else {
            body.join(",")
        }
    )
}

/// The bytes the `payload` function of a test module returns.
pub fn payload_of(m: &Module) -> Vec<u8> {
    m.function("payload")
        .unwrap()
        .invoke::<Bytes>(())
        .unwrap()
        .as_bytes()
        .to_vec()
}
