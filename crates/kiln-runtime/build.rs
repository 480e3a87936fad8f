//! Link settings for kiln-runtime's test and benchmark binaries, which load shared libraries
//! compiled by Kiln and Apache TVM: see `../export_dynamic.rs`.

include!("../export_dynamic.rs");

fn main() {
    export_dynamic(&["tests", "benches"]);
}
