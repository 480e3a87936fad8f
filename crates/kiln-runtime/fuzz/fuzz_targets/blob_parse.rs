//! Fuzzes the library blob parser: any input is an error or a blob that survives a write/parse
//! round trip; nothing panics, allocates without bound or reads out of bounds.
#![no_main]

use kiln_runtime::module::blob;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(bin) = blob::parse(data) {
        let again = blob::parse(&blob::write(&bin)).expect("a parsed blob writes back parseable");
        assert_eq!(again, bin);
        let legacy = blob::parse(&blob::write_legacy(&bin)).expect("legacy layout parses");
        assert_eq!(legacy, bin);
    }
});
