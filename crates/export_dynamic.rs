// The one link rule of the build scripts of the crates whose executables load compiled libraries
// (kiln-runtime, kiln-codegen, kiln-graph, kiln-topi, kiln-cli); each `build.rs` includes this
// file and calls `export_dynamic` with its kinds of executable.

/// Links this crate's executables of the given cargo kinds (`bins`, `tests`, `benches`) with
/// `-rdynamic`. The libraries that Kiln and Apache TVM compile import `TVMFFI*` functions (for
/// example `TVMFFIErrorSetRaisedFromCStrParts`) from the process's global scope, and a Rust
/// executable exports nothing by default; Python gets the same effect by loading the runtime
/// library with `RTLD_GLOBAL`.
fn export_dynamic(kinds: &[&str]) {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "freebsd" {
        for kind in kinds {
            println!("cargo:rustc-link-arg-{kind}=-rdynamic");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../export_dynamic.rs");
}
