//! Link settings for kiln-graph's test binaries: the graph build tests load exported libraries
//! that import `TVMFFI*` functions from the process's global scope, so tests are linked with
//! `-rdynamic` (as kiln-codegen's, kiln-topi's and kiln-runtime's tests are).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "freebsd" {
        println!("cargo:rustc-link-arg-tests=-rdynamic");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
