//! Fuzzes the VM factory loader (its params, segments' graph JSON and program): any input is
//! an error or a factory that saves and loads back to the same bytes; nothing panics,
//! allocates without bound or reads out of bounds.
#![no_main]

use kiln_runtime::module::ModuleNode;
use kiln_runtime::vm::{Code, VmFactory};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(code) = Code::from_bytes(data) {
        assert_eq!(Code::from_bytes(&code.to_bytes()).expect("written code reads"), code);
    }
    if let Ok(m) = VmFactory::load_from_bytes(data) {
        let f = m.downcast_node::<VmFactory>().expect("a VM factory");
        let bytes = f.save_to_bytes().expect("a loaded factory saves");
        let again = VmFactory::load_from_bytes(&bytes).expect("a saved factory loads");
        let g = again.downcast_node::<VmFactory>().expect("a VM factory");
        assert_eq!(g.save_to_bytes().expect("saves again"), bytes);
    }
});
