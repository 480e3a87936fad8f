//! The CPU device: aligned host allocations, strided host copies, no streams, and the
//! per-thread workspace pool for generated code.

use super::{DeviceApi, DeviceAttr, StreamHandle, ALLOC_ALIGNMENT};
use crate::tensor::layout::{checked_nbytes, checked_numel, compact_strides, dims, is_contiguous};
use kiln_ffi::abi::DLTensor;
use kiln_ffi::{Any, DataType, Device, Error, Result};
use std::alloc::Layout;
use std::ffi::c_void;

/// The CPU device API (device type 1). Every device id names the same host memory.
pub struct CpuDeviceApi;

/// The one CPU device API instance.
pub static CPU: CpuDeviceApi = CpuDeviceApi;

/// Bytes before each allocation that record its layout (size, offset from the block's start)
/// for the free.
const HEADER: usize = 2 * std::mem::size_of::<usize>();

/// The alignment blocks are requested with: the allocator's own (malloc's fast paths, where a
/// larger alignment takes `memalign`'s slower, fragmenting one); the data is aligned inside.
const BLOCK_ALIGN: usize = 16;

/// Allocates `nbytes` of host memory aligned to `alignment` (a power of two, raised to
/// [`ALLOC_ALIGNMENT`]). Never aborts: a size that cannot be allocated is an error.
pub fn alloc_aligned(nbytes: usize, alignment: usize) -> Result<*mut c_void> {
    if !alignment.is_power_of_two() {
        return Err(Error::value_error(format!(
            "alignment {alignment} is not a power of two"
        )));
    }
    let align = alignment.max(ALLOC_ALIGNMENT);
    // The data starts at the first `align` boundary past the header.
    let layout = nbytes
        .checked_add(align + HEADER)
        .and_then(|total| Layout::from_size_align(total, BLOCK_ALIGN).ok())
        .ok_or_else(|| {
            Error::value_error(format!(
                "cannot allocate {nbytes} bytes aligned to {align} on cpu: size too large"
            ))
        })?;
    // SAFETY: the layout has a non-zero size.
    let base = unsafe { std::alloc::alloc(layout) };
    if base.is_null() {
        return Err(Error::runtime_error(format!(
            "out of memory: cannot allocate {nbytes} bytes on cpu"
        )));
    }
    let offset = (base as usize + HEADER).next_multiple_of(align) - base as usize;
    // SAFETY: `HEADER <= offset <= HEADER + align`, so the header and the `nbytes` of data lie
    // inside the allocation.
    unsafe {
        let data = base.add(offset);
        let header = data.sub(HEADER) as *mut usize;
        header.write(layout.size());
        header.add(1).write(offset);
        Ok(data as *mut c_void)
    }
}

/// Frees memory from [`alloc_aligned`]; NULL is ignored.
///
/// # Safety
/// `ptr` must come from `alloc_aligned` and not be freed yet.
pub unsafe fn free_aligned(ptr: *mut c_void) -> Result<()> {
    if ptr.is_null() {
        return Ok(());
    }
    if !(ptr as usize).is_multiple_of(ALLOC_ALIGNMENT) {
        return Err(Error::value_error(format!(
            "cannot free {ptr:p} on cpu: not an address Kiln allocated (not {ALLOC_ALIGNMENT}-byte aligned)"
        )));
    }
    let data = ptr as *mut u8;
    // SAFETY: the caller guarantees `ptr` came from alloc_aligned, which stored the allocation's
    // size and the data's offset in it in the HEADER bytes before it.
    unsafe {
        let header = data.sub(HEADER) as *const usize;
        let (size, offset) = (header.read(), header.add(1).read());
        std::alloc::dealloc(
            data.sub(offset),
            Layout::from_size_align_unchecked(size, BLOCK_ALIGN),
        );
    }
    Ok(())
}

/// Reads a `kB` field of `/proc/meminfo` as bytes (Linux); None elsewhere.
fn meminfo_bytes(field: &str) -> Option<i64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kb: i64 = line[field.len()..]
        .trim_start_matches(':')
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

fn host_check(t: &DLTensor, side: &str) -> Result<()> {
    if super::is_host(Device(t.device)) {
        Ok(())
    } else {
        Err(Error::value_error(format!(
            "the CPU device API cannot copy {side} {}: not host memory",
            super::device_label(Device(t.device))
        )))
    }
}

/// Copies the elements of `from` into `to` on the host: one `memmove` when both are compact,
/// row by row (or element by element) otherwise.
///
/// # Safety
/// Both tensors must describe valid host memory with equal shapes and dtypes.
pub unsafe fn copy_host(from: &DLTensor, to: &DLTensor) -> Result<()> {
    // SAFETY: the caller guarantees both tensors are valid.
    let (shape, from_strides) = unsafe { dims(from) };
    // SAFETY: as above.
    let (_, to_strides) = unsafe { dims(to) };
    let numel = checked_numel(shape)?;
    if numel == 0 {
        return Ok(());
    }
    let dtype = DataType(from.dtype);
    // SAFETY: the byte offsets of valid tensors stay inside their allocations.
    let src = unsafe { (from.data as *const u8).add(from.byte_offset as usize) };
    // SAFETY: as above.
    let dst = unsafe { (to.data as *mut u8).add(to.byte_offset as usize) };
    if is_contiguous(shape, from_strides) && is_contiguous(shape, to_strides) {
        let nbytes = checked_nbytes(numel, dtype)?;
        // SAFETY: both compact tensors hold `nbytes` bytes from their offsets (equal shapes and
        // dtypes); `copy` allows overlap.
        unsafe { std::ptr::copy(src, dst, nbytes) };
        return Ok(());
    }
    let elem = dtype.bytes() as isize;
    let compact = compact_strides(shape);
    let fs = from_strides.unwrap_or(&compact);
    let ts = to_strides.unwrap_or(&compact);
    let last = shape.len() - 1;
    let inner = shape[last] as isize;
    let (fi, ti) = (fs[last] as isize, ts[last] as isize);
    let mut index = vec![0i64; last];
    loop {
        let mut fo: isize = 0;
        let mut to_off: isize = 0;
        for d in 0..last {
            fo += index[d] as isize * fs[d] as isize;
            to_off += index[d] as isize * ts[d] as isize;
        }
        // SAFETY: `index` stays inside the shape, so every row start and element the strides
        // reach lies inside each valid tensor's memory.
        unsafe {
            let (s, t) = (src.offset(fo * elem), dst.offset(to_off * elem));
            if fi == 1 && ti == 1 {
                std::ptr::copy(s, t, (inner * elem) as usize);
            } else {
                for k in 0..inner {
                    std::ptr::copy(
                        s.offset(k * fi * elem),
                        t.offset(k * ti * elem),
                        elem as usize,
                    );
                }
            }
        }
        // Next row: increment the outer index like an odometer.
        let mut d = last;
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

impl DeviceApi for CpuDeviceApi {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn get_attr(&self, _dev: Device, kind: DeviceAttr) -> Result<Any> {
        Ok(match kind {
            DeviceAttr::Exist => Any::from(1i64),
            DeviceAttr::DeviceName => Any::from("cpu"),
            DeviceAttr::MultiProcessorCount => Any::from(
                std::thread::available_parallelism()
                    .map(|n| n.get() as i64)
                    .unwrap_or(1),
            ),
            DeviceAttr::TotalGlobalMemory => Any::from(meminfo_bytes("MemTotal").unwrap_or(-1)),
            DeviceAttr::AvailableGlobalMemory => {
                Any::from(meminfo_bytes("MemAvailable").unwrap_or(-1))
            }
            _ => Any::none(),
        })
    }

    fn alloc_data_space(
        &self,
        _dev: Device,
        nbytes: usize,
        alignment: usize,
        _dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        alloc_aligned(nbytes, alignment)
    }

    unsafe fn free_data_space(&self, _dev: Device, ptr: *mut c_void) -> Result<()> {
        // SAFETY: the DeviceApi contract: `ptr` came from alloc_data_space, i.e. alloc_aligned.
        unsafe { free_aligned(ptr) }
    }

    unsafe fn copy_data_from_to(
        &self,
        from: &DLTensor,
        to: &DLTensor,
        _stream: StreamHandle,
    ) -> Result<()> {
        host_check(from, "from")?;
        host_check(to, "to")?;
        // SAFETY: the DeviceApi contract (valid tensors, equal shapes and dtypes); both are on
        // the host, as just checked.
        unsafe { copy_host(from, to) }
    }

    unsafe fn stream_sync(&self, _dev: Device, _stream: StreamHandle) -> Result<()> {
        Ok(())
    }

    fn alloc_workspace(
        &self,
        dev: Device,
        nbytes: usize,
        _dtype_hint: DataType,
    ) -> Result<*mut c_void> {
        crate::workspace::cpu_alloc(dev, nbytes as u64)
    }

    unsafe fn free_workspace(&self, dev: Device, ptr: *mut c_void) -> Result<()> {
        crate::workspace::cpu_free(dev, ptr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_and_freed() {
        for (n, a) in [(0, 1), (1, 64), (100, 128), (4096, 4096), (12345, 16)] {
            let p = alloc_aligned(n, a).unwrap();
            assert_eq!(p as usize % a.max(64), 0, "{n} bytes aligned to {a}");
            // SAFETY: freshly allocated, n bytes writable.
            unsafe {
                std::ptr::write_bytes(p as *mut u8, 0xab, n);
                free_aligned(p).unwrap();
            }
        }
        // SAFETY: NULL is ignored.
        unsafe { free_aligned(std::ptr::null_mut()).unwrap() };
    }

    #[test]
    fn impossible_sizes_are_errors_not_aborts() {
        let e = alloc_aligned(usize::MAX - 10, 64).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        assert!(alloc_aligned(isize::MAX as usize, 64).is_err());
        assert_eq!(alloc_aligned(8, 48).unwrap_err().kind(), "ValueError");
        let mut x = 0u64;
        // SAFETY: the misaligned pointer is rejected before it is read.
        let e = unsafe { free_aligned((&mut x as *mut u64 as *mut u8).add(1) as *mut c_void) };
        assert!(e.is_err());
    }

    #[test]
    fn attributes() {
        let dev = Device::cpu(0);
        let get = |k| CPU.get_attr(dev, k).unwrap();
        assert_eq!(get(DeviceAttr::Exist).try_as::<i64>().unwrap(), 1);
        assert!(
            get(DeviceAttr::MultiProcessorCount)
                .try_as::<i64>()
                .unwrap()
                >= 1
        );
        assert!(get(DeviceAttr::TotalGlobalMemory).try_as::<i64>().unwrap() > 0);
        assert!(get(DeviceAttr::WarpSize).is_none());
    }
}
