//! Link settings for kiln-topi's test binaries, which load compiled operator libraries: see
//! `../export_dynamic.rs`.

include!("../export_dynamic.rs");

fn main() {
    export_dynamic(&["tests"]);
}
