//! Workspace memory for generated code: `TVMBackendAllocWorkspace` / `TVMBackendFreeWorkspace`.
//!
//! Compiled functions ask for temporary buffers too large for the stack and give them back
//! before returning, in stack order. Each thread keeps its own pool of CPU blocks: a freed block
//! goes to the thread's free list and the next request of a size it can hold takes it back, so a
//! function called in a loop allocates only on its first call. Blocks are 64-byte aligned.
//! A pointer must be freed on the thread that allocated it (as in TVM); freeing anything else
//! is an error, not a crash. Other devices go through their [`DeviceApi`] workspace hooks.
//!
//! [`DeviceApi`]: crate::device::DeviceApi

use crate::device::{cpu, device_api, device_label, ALLOC_ALIGNMENT};
use kiln_ffi::device::device_type;
use kiln_ffi::error::ffi_guard;
use kiln_ffi::{DataType, Device, Error, Result};
use std::cell::RefCell;
use std::ffi::{c_int, c_void};

/// Sizes below this round up to a multiple of the alignment; larger ones to whole pages, so
/// blocks of nearby sizes are interchangeable.
const PAGE: usize = 4096;

/// The free list keeps at most this many blocks; beyond it the largest is released.
const MAX_FREE_BLOCKS: usize = 64;

#[derive(Clone, Copy, Debug)]
struct Block {
    ptr: *mut c_void,
    size: usize,
}

/// One thread's CPU workspace: blocks in use (in allocation order) and free blocks (sorted by
/// size, smallest first).
#[derive(Default)]
struct Pool {
    in_use: Vec<Block>,
    free: Vec<Block>,
}

fn rounded(nbytes: u64) -> Result<usize> {
    let n = usize::try_from(nbytes)
        .ok()
        .filter(|&n| n <= isize::MAX as usize - PAGE)
        .ok_or_else(|| {
            Error::value_error(format!(
                "cannot allocate a workspace of {nbytes} bytes on cpu: size too large"
            ))
        })?
        .max(1);
    let unit = if n < PAGE { ALLOC_ALIGNMENT } else { PAGE };
    Ok(n.div_ceil(unit) * unit)
}

impl Pool {
    fn alloc(&mut self, nbytes: u64) -> Result<*mut c_void> {
        let size = rounded(nbytes)?;
        // Best fit: the smallest free block that holds the request.
        let block = match self.free.iter().position(|b| b.size >= size) {
            Some(i) => self.free.remove(i),
            None => {
                // Free blocks are all too small: drop the largest before growing, so a pool
                // that sees ever larger requests does not keep every earlier size.
                if let Some(b) = self.free.pop() {
                    // SAFETY: free-list blocks came from alloc_aligned and are unused.
                    unsafe { cpu::free_aligned(b.ptr)? };
                }
                Block {
                    ptr: cpu::alloc_aligned(size, ALLOC_ALIGNMENT)?,
                    size,
                }
            }
        };
        self.in_use.push(block);
        Ok(block.ptr)
    }

    fn free(&mut self, ptr: *mut c_void) -> Result<()> {
        // Stack order makes the last block the usual match.
        let i = self
            .in_use
            .iter()
            .rposition(|b| b.ptr == ptr)
            .ok_or_else(|| {
                Error::value_error(format!(
                    "TVMBackendFreeWorkspace: {ptr:p} is not a workspace allocated on this thread \
                     for cpu (already freed, or allocated on another thread or device)"
                ))
            })?;
        let block = self.in_use.remove(i);
        let at = self.free.partition_point(|b| b.size < block.size);
        self.free.insert(at, block);
        if self.free.len() > MAX_FREE_BLOCKS {
            let big = self.free.pop().expect("free list is not empty");
            // SAFETY: the block came from alloc_aligned and is unused.
            unsafe { cpu::free_aligned(big.ptr)? };
        }
        Ok(())
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Blocks still in use at thread exit are leaked rather than freed under someone's feet.
        for b in self.free.drain(..) {
            // SAFETY: free-list blocks came from alloc_aligned and are unused.
            let _ = unsafe { cpu::free_aligned(b.ptr) };
        }
    }
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool::default());
}

fn with_pool<R>(f: impl FnOnce(&mut Pool) -> Result<R>) -> Result<R> {
    POOL.try_with(|p| f(&mut p.borrow_mut()))
        .unwrap_or_else(|_| {
            Err(Error::runtime_error(
                "the workspace pool of this thread is gone (thread is exiting)",
            ))
        })
}

/// Allocates CPU workspace from this thread's pool (64-byte aligned).
pub(crate) fn cpu_alloc(_dev: Device, nbytes: u64) -> Result<*mut c_void> {
    with_pool(|p| p.alloc(nbytes))
}

/// Returns CPU workspace to this thread's pool.
pub(crate) fn cpu_free(_dev: Device, ptr: *mut c_void) -> Result<()> {
    with_pool(|p| p.free(ptr))
}

/// Allocates `nbytes` of workspace on `dev` (CPU: this thread's pool; other devices: their
/// device API). The memory is 64-byte aligned and must be freed with [`free_workspace`] on the
/// same thread.
pub fn alloc_workspace(dev: Device, nbytes: u64, dtype_hint: DataType) -> Result<*mut c_void> {
    if dev.device_type() == device_type::CPU {
        return cpu_alloc(dev, nbytes);
    }
    let n = usize::try_from(nbytes).map_err(|_| {
        Error::value_error(format!(
            "cannot allocate a workspace of {nbytes} bytes on {}: size too large",
            device_label(dev)
        ))
    })?;
    device_api(dev)?.alloc_workspace(dev, n, dtype_hint)
}

/// Frees workspace from [`alloc_workspace`].
///
/// # Safety
/// For devices other than the CPU, `ptr` must come from `alloc_workspace` for `dev`. (CPU
/// pointers are checked against the pool.)
pub unsafe fn free_workspace(dev: Device, ptr: *mut c_void) -> Result<()> {
    if dev.device_type() == device_type::CPU {
        return cpu_free(dev, ptr);
    }
    // SAFETY: the caller guarantees `ptr` came from this device's alloc_workspace.
    unsafe { device_api(dev)?.free_workspace(dev, ptr) }
}

/// Statistics of this thread's CPU workspace pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolStats {
    /// Blocks handed out and not freed yet.
    pub in_use: usize,
    /// Blocks kept for reuse.
    pub free: usize,
    /// Bytes held by the pool (in use and free).
    pub bytes: usize,
}

/// The state of the calling thread's CPU workspace pool (for tests and diagnostics).
pub fn thread_pool_stats() -> PoolStats {
    POOL.with(|p| {
        let p = p.borrow();
        PoolStats {
            in_use: p.in_use.len(),
            free: p.free.len(),
            bytes: p.in_use.iter().chain(&p.free).map(|b| b.size).sum(),
        }
    })
}

fn dtype_hint(code: c_int, bits: c_int) -> DataType {
    DataType::new(code as u8, bits as u8, 1)
}

/// Allocates workspace for generated code; NULL with the error raised on failure.
///
/// # Safety
/// Callable from C with any arguments.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendAllocWorkspace(
    device_type: c_int,
    device_id: c_int,
    nbytes: u64,
    dtype_code_hint: c_int,
    dtype_bits_hint: c_int,
) -> *mut c_void {
    let mut out = std::ptr::null_mut();
    let rc = ffi_guard(|| {
        let dev = Device::new(device_type, device_id);
        out = alloc_workspace(dev, nbytes, dtype_hint(dtype_code_hint, dtype_bits_hint))?;
        Ok(())
    });
    if rc == 0 {
        out
    } else {
        std::ptr::null_mut()
    }
}

/// Frees workspace from `TVMBackendAllocWorkspace`: 0, or -1 with the error raised (an unknown
/// pointer, a device without a device API).
///
/// # Safety
/// Callable from C; for non-CPU devices `ptr` must come from `TVMBackendAllocWorkspace`.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendFreeWorkspace(
    device_type: c_int,
    device_id: c_int,
    ptr: *mut c_void,
) -> c_int {
    ffi_guard(|| {
        if ptr.is_null() {
            return Err(Error::value_error(
                "TVMBackendFreeWorkspace: the pointer is NULL",
            ));
        }
        // SAFETY: the caller's contract is free_workspace's.
        unsafe { free_workspace(Device::new(device_type, device_id), ptr) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_to_alignment_or_pages() {
        assert_eq!(rounded(0).unwrap(), 64);
        assert_eq!(rounded(65).unwrap(), 128);
        assert_eq!(rounded(4096).unwrap(), 4096);
        assert_eq!(rounded(4097).unwrap(), 8192);
        assert!(rounded(u64::MAX).is_err());
    }
}
