//! Helpers shared by the RPC tests: a server on an ephemeral port and a small C library.

#![allow(dead_code)]

use kiln_rpc::{Server, ServerConfig};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A server on a free loopback port.
pub fn server(key: &str) -> Server {
    kiln_rpc::link_globals();
    kiln_runtime::link_ffi();
    Server::start(ServerConfig {
        port: 0,
        key: key.into(),
        ..Default::default()
    })
    .expect("server starts")
}

const ADD_ONE_C: &str = r#"
#include <stdint.h>
typedef struct { int32_t type_index; uint32_t pad; union { int64_t i; double f; void* p; } v; } Any;
typedef struct { void* data; int32_t dev_type, dev_id; int32_t ndim; uint8_t code, bits; uint16_t lanes;
                 int64_t* shape; int64_t* strides; uint64_t byte_offset; } DLTensor;
static DLTensor* tensor_of(const Any* a) {
  return a->type_index == 70 ? (DLTensor*)((char*)a->v.p + 24) : (DLTensor*)a->v.p;
}
int __tvm_ffi_add_one(void* self, const Any* args, int32_t n, Any* ret) {
  DLTensor* a = tensor_of(&args[0]);
  DLTensor* b = tensor_of(&args[1]);
  const float* x = (const float*)((char*)a->data + a->byte_offset);
  float* y = (float*)((char*)b->data + b->byte_offset);
  for (int64_t i = 0; i < a->shape[0]; ++i) y[i] = x[i] + 1.0f;
  ret->type_index = 0;
  return 0;
}
"#;

/// Builds `add_one.so` (a library with one function `add_one(a, b)`: b = a + 1) in `dir`.
pub fn build_add_one(dir: &Path) -> PathBuf {
    let src = dir.join("add_one.c");
    let lib = dir.join("add_one.so");
    std::fs::write(&src, ADD_ONE_C).unwrap();
    let st = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .expect("cc runs");
    assert!(st.success());
    lib
}

/// A fresh scratch folder.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-rpc-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
