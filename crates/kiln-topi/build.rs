//! Link settings for kiln-topi's test binaries: they load compiled operator libraries that
//! import `TVMFFI*` functions from the process's global scope, so tests are linked with
//! `-rdynamic` (as kiln-codegen's and kiln-runtime's tests are).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "freebsd" {
        println!("cargo:rustc-link-arg-tests=-rdynamic");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
