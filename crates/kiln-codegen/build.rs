//! Link settings for kiln-codegen's test and bench binaries.
//!
//! The tests load libraries that import `TVMFFIErrorSetRaisedFromCStrParts` from the process's
//! global scope, so test and bench executables are linked with `-rdynamic` to export Kiln's C functions
//! (as kiln-runtime's tests are).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "freebsd" {
        println!("cargo:rustc-link-arg-tests=-rdynamic");
        println!("cargo:rustc-link-arg-benches=-rdynamic");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
