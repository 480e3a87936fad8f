//! Link settings for kiln-codegen's test and bench binaries, which load the libraries they
//! compile: see `../export_dynamic.rs`.

include!("../export_dynamic.rs");

fn main() {
    export_dynamic(&["tests", "benches"]);
}
