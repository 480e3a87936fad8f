//! Per-call overhead of Kiln's FFI from Rust: `testing.nop()` and `testing.echo(1)`, called
//! typed (Rust to Rust fast path) and through the C entry `TVMFFIFunctionCall`.
//! Warm-up, then the median of 7 runs of N calls. Run: `cargo bench -p kiln-ffi --bench ffi_call`.

use kiln_ffi::abi::RawAny;
use kiln_ffi::c_api::{TVMFFIFunctionCall, TVMFFIObjectDecRef};
use kiln_ffi::{registry, Any};
use std::hint::black_box;

const N: usize = 5_000_000;
const RUNS: usize = 7;

/// Nanoseconds per call of `body` (warm-up, then the median of RUNS runs of N calls).
fn median_ns(body: impl FnMut()) -> f64 {
    kiln_testing::bench::median_ns(N, RUNS, N / 10, body)
}

fn main() {
    let nop = registry::get("testing.nop").expect("testing.nop");
    let echo = registry::get("testing.echo").expect("testing.echo");

    let t = median_ns(|| {
        black_box(nop.call(black_box(&[])).unwrap());
    });
    println!("rust nop {t:.2}");
    let t = median_ns(|| {
        black_box(echo.invoke::<i64>(black_box((1i64,))).unwrap());
    });
    println!("rust echo_int {t:.2}");

    let nop_handle = nop.0.as_ptr().as_ptr() as *mut std::ffi::c_void;
    let echo_handle = echo.0.as_ptr().as_ptr() as *mut std::ffi::c_void;
    let t = median_ns(|| {
        let mut out = RawAny::NONE;
        // SAFETY: a live function handle, no arguments, a result slot set to None.
        let rc =
            unsafe { TVMFFIFunctionCall(black_box(nop_handle), std::ptr::null_mut(), 0, &mut out) };
        assert_eq!(rc, 0);
    });
    println!("rust_via_c nop {t:.2}");
    let t = median_ns(|| {
        let mut arg = Any::from(1i64).into_raw();
        let mut out = RawAny::NONE;
        // SAFETY: as above, with one int argument; an int result owns nothing.
        let rc = unsafe { TVMFFIFunctionCall(black_box(echo_handle), &mut arg, 1, &mut out) };
        assert_eq!(rc, 0);
        black_box(out);
    });
    println!("rust_via_c echo_int {t:.2}");
    // SAFETY: no handle was taken above; keep the symbol referenced for the linker.
    unsafe { TVMFFIObjectDecRef(std::ptr::null_mut()) };
}
