//! The `kiln` executable loads compiled libraries (Kiln's and Apache TVM's) that import
//! `TVMFFIErrorSetRaisedFromCStrParts` from the process's global scope: link it with
//! `-rdynamic` so Kiln's C functions are exported from the executable; its tests, which load
//! compiled libraries in-process, likewise.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "freebsd" {
        println!("cargo:rustc-link-arg-bins=-rdynamic");
        println!("cargo:rustc-link-arg-tests=-rdynamic");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
