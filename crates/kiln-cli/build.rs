//! Link settings for the `kiln` executable and its tests, which load compiled libraries (Kiln's
//! and Apache TVM's) in-process: see `../export_dynamic.rs`.

include!("../export_dynamic.rs");

fn main() {
    export_dynamic(&["bins", "tests"]);
}
