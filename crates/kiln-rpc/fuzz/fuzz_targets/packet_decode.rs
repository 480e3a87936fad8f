//! Feeds arbitrary bytes to the RPC packet decoder and, framed as a session, to the server's
//! dispatch: neither may panic, whatever the bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = kiln_rpc::codec::decode_packet(data);
    if data.first().is_some_and(|b| b & 1 == 1) {
        let dir = std::env::temp_dir().join("kiln-rpc-fuzz");
        let _ = std::fs::create_dir_all(&dir);
        let _ = kiln_rpc::server::serve_bytes(&data[1..], &dir);
    }
});
