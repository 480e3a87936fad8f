//! Link settings for kiln-runtime's test and benchmark binaries.
//!
//! The tests load shared libraries compiled by Kiln and Apache TVM. Those import
//! `TVMFFIErrorSetRaisedFromCStrParts` from the process's global scope, so test executables are
//! linked with `-rdynamic` to export Kiln's C functions (a Rust executable exports nothing by
//! default). Python gets the same effect by loading the runtime library with `RTLD_GLOBAL`.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "freebsd" {
        println!("cargo:rustc-link-arg-tests=-rdynamic");
        println!("cargo:rustc-link-arg-benches=-rdynamic");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
