//! Link settings for kiln-graph's test binaries, which load the libraries the graph build
//! exports: see `../export_dynamic.rs`.

include!("../export_dynamic.rs");

fn main() {
    export_dynamic(&["tests"]);
}
