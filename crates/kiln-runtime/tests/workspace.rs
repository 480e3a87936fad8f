//! The workspace allocator through its exported C functions: reuse in stack order, alignment,
//! bad pointers, impossible sizes, and many threads at once.

use kiln_runtime::workspace::{
    thread_pool_stats, TVMBackendAllocWorkspace, TVMBackendFreeWorkspace,
};
use std::ffi::c_void;

const CPU: i32 = 1;

fn alloc(n: u64) -> *mut c_void {
    // SAFETY: the C entry accepts any arguments.
    unsafe { TVMBackendAllocWorkspace(CPU, 0, n, 2, 32) }
}

fn free(p: *mut c_void) -> i32 {
    // SAFETY: the C entry checks CPU pointers against the pool.
    unsafe { TVMBackendFreeWorkspace(CPU, 0, p) }
}

#[test]
fn stack_order_reuses_memory() {
    let sizes = [100u64, 5000, 64, 1 << 20];
    let first: Vec<_> = sizes.iter().map(|&n| alloc(n)).collect();
    for &p in first.iter().rev() {
        assert_eq!(free(p), 0);
    }
    let stats = thread_pool_stats();
    assert_eq!(stats.in_use, 0);
    for _ in 0..1000 {
        let again: Vec<_> = sizes.iter().map(|&n| alloc(n)).collect();
        let mut a = again.clone();
        let mut b = first.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b, "the same blocks come back");
        for &p in again.iter().rev() {
            assert_eq!(free(p), 0);
        }
    }
    assert_eq!(thread_pool_stats(), stats, "the pool did not grow");
}

#[test]
fn blocks_are_aligned_and_writable() {
    let mut live = Vec::new();
    for n in [0u64, 1, 63, 64, 65, 1000, 4095, 4096, 4097, 123_457] {
        let p = alloc(n);
        assert!(!p.is_null());
        assert_eq!(p as usize % 64, 0, "{n} bytes");
        // SAFETY: the block holds at least n bytes.
        unsafe { std::ptr::write_bytes(p as *mut u8, 0x5a, n as usize) };
        live.push(p);
    }
    for p in live.into_iter().rev() {
        assert_eq!(free(p), 0);
    }
}

#[test]
fn bad_frees_and_sizes_are_errors() {
    let mut x = [0u64; 8];
    assert_eq!(free(x.as_mut_ptr() as *mut c_void), -1);
    let e = kiln_ffi::error::take_raised("test");
    assert_eq!(e.kind(), "ValueError");
    assert!(e.message().contains("not a workspace"), "{e}");
    let p = alloc(128);
    assert_eq!(free(p), 0);
    assert_eq!(free(p), -1, "double free");
    kiln_ffi::error::take_raised("test");
    assert_eq!(free(std::ptr::null_mut()), -1);
    kiln_ffi::error::take_raised("test");

    assert!(alloc(u64::MAX).is_null());
    let e = kiln_ffi::error::take_raised("test");
    assert!(e.message().contains("too large"), "{e}");
    // SAFETY: the C entry accepts any arguments.
    let p = unsafe { TVMBackendAllocWorkspace(77, 3, 64, 2, 32) };
    assert!(p.is_null());
    let e = kiln_ffi::error::take_raised("test");
    assert!(e.message().contains("device type 77:3"), "{e}");
    assert_eq!(
        // SAFETY: an unknown device fails before the pointer is used.
        unsafe { TVMBackendFreeWorkspace(77, 0, x.as_mut_ptr() as *mut c_void) },
        -1
    );
    kiln_ffi::error::take_raised("test");
}

#[test]
fn a_pointer_belongs_to_its_thread() {
    let p = alloc(256) as usize;
    let rc = std::thread::spawn(move || {
        let rc = free(p as *mut c_void);
        kiln_ffi::error::take_raised("test");
        rc
    })
    .join()
    .unwrap();
    assert_eq!(rc, -1);
    assert_eq!(free(p as *mut c_void), 0);
}

#[test]
fn many_threads_allocate_at_once() {
    let threads: Vec<_> = (0..8u8)
        .map(|t| {
            std::thread::spawn(move || {
                for round in 0..2000u64 {
                    let sizes = [64 + round % 300, 4096 + t as u64 * 7, 200];
                    let ps: Vec<_> = sizes.iter().map(|&n| alloc(n)).collect();
                    for (i, (&p, &n)) in ps.iter().zip(&sizes).enumerate() {
                        // SAFETY: each block holds n bytes and belongs to this thread.
                        unsafe { std::ptr::write_bytes(p as *mut u8, t ^ i as u8, n as usize) };
                    }
                    for (i, (&p, &n)) in ps.iter().zip(&sizes).enumerate() {
                        // SAFETY: as above.
                        let s = unsafe { std::slice::from_raw_parts(p as *const u8, n as usize) };
                        assert!(s.iter().all(|&b| b == t ^ i as u8), "thread {t} block {i}");
                    }
                    for &p in ps.iter().rev() {
                        assert_eq!(free(p), 0);
                    }
                }
                thread_pool_stats()
            })
        })
        .collect();
    for t in threads {
        let stats = t.join().unwrap();
        assert_eq!(stats.in_use, 0);
        assert!(stats.free <= 64);
    }
}
