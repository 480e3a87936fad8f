//! Tensors end to end: allocation, typed access, views, copies across devices, DLPack import and
//! export through the exported C functions, globals, and bad input.

use half::{bf16, f16};
use kiln_ffi::abi::DLTensor;
use kiln_ffi::{Any, Array, DataType, Device, Error, Result, Shape};
use kiln_runtime::device::{self, cpu, DeviceApi, DeviceAttr, StreamHandle};
use kiln_runtime::tensor::dlpack::{
    DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, TVMFFITensorCreateUnsafeView,
    TVMFFITensorFromDLPack, TVMFFITensorFromDLPackVersioned, TVMFFITensorToDLPack,
    TVMFFITensorToDLPackVersioned,
};
use kiln_runtime::tensor::{Tensor, TensorObj};
use kiln_testing::error::expect_err;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

fn cpu0() -> Device {
    Device::cpu(0)
}

/// A tiny deterministic generator, so the data differs per test without a dependency.
fn lcg(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s >> 33
    }
}

#[test]
fn typed_round_trips_for_many_dtypes() {
    let mut r = lcg(7);
    let f: Vec<f32> = (0..60).map(|_| r() as f32 / 1000.0).collect();
    let t = Tensor::from_slice(&f, &[3, 4, 5]).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), f);
    assert_eq!(t.as_slice::<f32>().unwrap(), &f[..]);
    assert_eq!(t.dtype().to_string(), "float32");

    let h: Vec<f16> = (0..10).map(|i| f16::from_f32(i as f32 * 0.5)).collect();
    let t = Tensor::from_slice(&h, &[10]).unwrap();
    assert_eq!(t.dtype().to_string(), "float16");
    assert_eq!(t.to_vec::<f16>().unwrap(), h);
    assert_eq!(t.to_f64_vec().unwrap()[3], 1.5);

    let b: Vec<bf16> = (0..6).map(|i| bf16::from_f32(i as f32 - 2.0)).collect();
    let t = Tensor::from_slice(&b, &[2, 3]).unwrap();
    assert_eq!(t.dtype().to_string(), "bfloat16");
    assert_eq!(
        t.to_f64_vec().unwrap(),
        vec![-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]
    );

    let i: Vec<i64> = (0..7).map(|_| r() as i64 - (1 << 30)).collect();
    assert_eq!(
        Tensor::from_slice(&i, &[7])
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        i
    );
    let bools = [true, false, true];
    let t = Tensor::from_slice(&bools, &[3]).unwrap();
    assert_eq!(t.as_slice::<bool>().unwrap(), &bools);
    // A uint8 view holding 2 is not a valid bool tensor.
    t.view(&[3], DataType::uint(8))
        .unwrap()
        .copy_from_slice(&[0u8, 2, 1])
        .unwrap();
    assert_eq!(t.as_slice::<bool>().unwrap_err().kind(), "ValueError");

    let t = Tensor::from_f64s(&[1.0, 2.5], &[2], DataType::float(16), cpu0()).unwrap();
    assert_eq!(t.to_f64_vec().unwrap(), vec![1.0, 2.5]);
    let scalar = Tensor::from_slice(&[42i32], &[]).unwrap();
    assert_eq!(scalar.ndim(), 0);
    assert_eq!(scalar.to_vec::<i32>().unwrap(), vec![42]);
    let none = Tensor::from_slice::<f32>(&[], &[0, 5]).unwrap();
    assert_eq!(none.numel(), 0);
    assert!(none.as_slice::<f32>().unwrap().is_empty());
}

#[test]
fn dtype_and_size_mismatches_name_what_and_where() {
    let t = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let e = expect_err(t.as_slice::<i32>(), "TypeError", "");
    assert!(
        e.message().contains("float32") && e.message().contains("int32"),
        "{e}"
    );
    let e = expect_err(t.copy_from_bytes(&[0u8; 7]), "ValueError", "");
    assert!(e.message().contains("8 bytes but got 7"), "{e}");
    let e = Tensor::from_slice(&[1.0f32; 5], &[2, 3]).unwrap_err();
    assert!(e.message().contains("6 elements"), "{e}");

    let a = Tensor::empty(&[2, 3], DataType::float(32), cpu0()).unwrap();
    let b = Tensor::empty(&[3, 2], DataType::float(32), cpu0()).unwrap();
    let e = expect_err(a.copy_from(&b), "ValueError", "");
    assert!(e.message().contains("[3, 2] float32 on cpu:0"), "{e}");
    assert!(e.message().contains("[2, 3] float32 on cpu:0"), "{e}");
    let c = Tensor::empty(&[2, 3], DataType::int(32), cpu0()).unwrap();
    let e = expect_err(a.copy_from(&c), "TypeError", "");
    assert!(
        e.message().contains("int32") && e.message().contains("float32"),
        "{e}"
    );
}

#[test]
fn huge_and_negative_shapes_are_errors() {
    for shape in [
        vec![-1i64],
        vec![i64::MAX, 2],
        vec![1 << 31, 1 << 31, 1 << 31],
    ] {
        let e = Tensor::empty(&shape, DataType::float(64), cpu0()).unwrap_err();
        assert_eq!(e.kind(), "ValueError", "{shape:?}: {e}");
    }
    // Fits in 64 bits but not in memory: an error, not an abort.
    let e = Tensor::empty(&[1 << 46], DataType::float(64), cpu0()).unwrap_err();
    assert!(
        e.message().contains("cannot allocate") || e.message().contains("out of memory"),
        "{e}"
    );
    expect_err(
        Tensor::empty(&[2], DataType::void(), cpu0()),
        "ValueError",
        "",
    );
}

#[test]
fn views_share_storage_and_check_sizes() {
    let t = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    let v = t.view(&[3, 2], DataType::int(32)).unwrap();
    let bytes = t.view(&[24], DataType::uint(8)).unwrap();
    v.copy_from_slice(&[10i32, 20, 30, 40, 50, 60]).unwrap();
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![10, 20, 30, 40, 50, 60]);
    assert_eq!(bytes.to_vec::<u8>().unwrap()[..4], 10i32.to_le_bytes());
    let e = t.view(&[7], DataType::int(32)).unwrap_err();
    assert!(e.message().contains("larger than the tensor"), "{e}");
    // The view keeps the data alive after the original handle is gone.
    drop(t);
    assert_eq!(v.to_vec::<i32>().unwrap()[5], 60);
}

/// A transposed (non-contiguous) view of a 2-D tensor, made through the C function.
fn transposed(t: &Tensor) -> Tensor {
    let (r, c) = (t.shape()[0], t.shape()[1]);
    let mut shape = [c, r];
    let mut strides = [1i64, c];
    let proto = DLTensor {
        shape: shape.as_mut_ptr(),
        strides: strides.as_mut_ptr(),
        ..*t.dl_tensor()
    };
    let mut out = std::ptr::null_mut();
    // SAFETY: the prototype describes the source's memory.
    let rc = unsafe {
        TVMFFITensorCreateUnsafeView(t.0.as_ptr().as_ptr() as *mut c_void, &proto, &mut out)
    };
    assert_eq!(rc, 0);
    // SAFETY: success returns an owned tensor object.
    Tensor(unsafe { kiln_ffi::ObjectRef::from_raw(NonNull::new(out as *mut _).unwrap()) })
}

#[test]
fn strided_copies_follow_strides() {
    let t = Tensor::from_slice(&(0..12).collect::<Vec<i16>>(), &[3, 4]).unwrap();
    let tt = transposed(&t);
    assert!(!tt.is_contiguous());
    assert_eq!(tt.shape(), &[4, 3]);
    let want: Vec<i16> = (0..4)
        .flat_map(|j| (0..3).map(move |i| i * 4 + j))
        .collect();
    assert_eq!(tt.to_vec::<i16>().unwrap(), want);
    assert_eq!(tt.as_slice::<i16>().unwrap_err().kind(), "ValueError");
    // Strided destination: write through the transposed view.
    let src = Tensor::from_slice(&want, &[4, 3]).unwrap();
    let fresh = Tensor::empty(&[3, 4], DataType::int(16), cpu0()).unwrap();
    transposed(&fresh).copy_from(&src).unwrap();
    assert_eq!(fresh.to_vec::<i16>().unwrap(), t.to_vec::<i16>().unwrap());
    let e = tt.view(&[12], DataType::int(16)).unwrap_err();
    assert!(e.message().contains("non-contiguous"), "{e}");
}

/// A fake accelerator (device type 200) backed by host memory, counting allocations.
struct FakeDevice {
    allocs: AtomicUsize,
    frees: AtomicUsize,
    copies: AtomicUsize,
}

impl DeviceApi for FakeDevice {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn get_attr(&self, _dev: Device, kind: DeviceAttr) -> Result<Any> {
        Ok(Any::from((kind == DeviceAttr::Exist) as i64))
    }
    fn alloc_data_space(&self, _: Device, n: usize, a: usize, _: DataType) -> Result<*mut c_void> {
        self.allocs.fetch_add(1, Ordering::SeqCst);
        cpu::alloc_aligned(n, a)
    }
    unsafe fn free_data_space(&self, _: Device, p: *mut c_void) -> Result<()> {
        self.frees.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the DeviceApi contract: `p` came from alloc_data_space, i.e. alloc_aligned.
        unsafe { cpu::free_aligned(p) }
    }
    unsafe fn copy_data_from_to(&self, f: &DLTensor, t: &DLTensor, _: StreamHandle) -> Result<()> {
        self.copies.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the DeviceApi contract: both tensors describe live host memory.
        unsafe { cpu::copy_host(f, t) }
    }
    unsafe fn stream_sync(&self, _: Device, _: StreamHandle) -> Result<()> {
        Ok(())
    }
}

static FAKE: FakeDevice = FakeDevice {
    allocs: AtomicUsize::new(0),
    frees: AtomicUsize::new(0),
    copies: AtomicUsize::new(0),
};

#[test]
fn copies_across_devices_go_through_the_device_api_and_memory_is_freed() {
    device::register_device_api(200, &FAKE, true).unwrap();
    let dev = Device::new(200, 0);
    let host = Tensor::from_slice(&[1.5f64, 2.5, 3.5], &[3]).unwrap();
    let (a0, f0) = (
        FAKE.allocs.load(Ordering::SeqCst),
        FAKE.frees.load(Ordering::SeqCst),
    );
    let on_dev = host.to_device(dev).unwrap();
    assert_eq!(on_dev.device(), dev);
    assert!(on_dev.is_aligned(64));
    // Host access to device memory is refused; copies work.
    assert!(on_dev.as_slice::<f64>().is_err());
    assert_eq!(on_dev.to_vec::<f64>().unwrap(), vec![1.5, 2.5, 3.5]);
    on_dev
        .copy_from_bytes(&7.0f64.to_le_bytes().repeat(3))
        .unwrap();
    assert!(FAKE.copies.load(Ordering::SeqCst) >= 3);
    let view = on_dev.view(&[24], DataType::uint(8)).unwrap();
    drop(on_dev);
    assert_eq!(
        FAKE.frees.load(Ordering::SeqCst),
        f0,
        "a view keeps the data"
    );
    drop(view);
    assert_eq!(FAKE.allocs.load(Ordering::SeqCst), a0 + 1);
    assert_eq!(FAKE.frees.load(Ordering::SeqCst), f0 + 1);
    // Two different non-host devices: no direct path.
    let t2 = Tensor::empty(&[3], DataType::float(64), dev).unwrap();
    device::register_device_api(201, &FAKE, true).unwrap();
    let t3 = Tensor::empty(&[3], DataType::float(64), Device::new(201, 0)).unwrap();
    let e = t3.copy_from(&t2).unwrap_err();
    assert!(e.message().contains("copy through a CPU tensor"), "{e}");
}

static PRODUCER_DELETES: AtomicUsize = AtomicUsize::new(0);
/// Held by the tests that count `PRODUCER_DELETES`.
static PRODUCER_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A DLPack producer: a heap buffer described by a legacy or versioned managed tensor.
struct Produced {
    data: Vec<f32>,
    shape: [i64; 2],
}

unsafe extern "C" fn legacy_deleter(m: *mut DLManagedTensor) {
    // SAFETY: `m` and its context were boxed by the producer, and the consumer deletes once.
    unsafe {
        drop(Box::from_raw((*m).manager_ctx as *mut Produced));
        drop(Box::from_raw(m));
    }
    PRODUCER_DELETES.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn versioned_deleter(m: *mut DLManagedTensorVersioned) {
    // SAFETY: `m` and its context were boxed by the producer, and the consumer deletes once.
    unsafe {
        drop(Box::from_raw((*m).manager_ctx as *mut Produced));
        drop(Box::from_raw(m));
    }
    PRODUCER_DELETES.fetch_add(1, Ordering::SeqCst);
}

fn produced_dl(p: &mut Produced, offset: u64) -> DLTensor {
    DLTensor {
        data: p.data.as_mut_ptr() as *mut c_void,
        device: cpu0().0,
        ndim: 2,
        dtype: DataType::float(32).0,
        shape: p.shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: offset,
    }
}

fn produce_legacy(values: &[f32]) -> *mut DLManagedTensor {
    let mut p = Box::new(Produced {
        data: values.to_vec(),
        shape: [2, values.len() as i64 / 2],
    });
    let dl = produced_dl(&mut p, 0);
    Box::into_raw(Box::new(DLManagedTensor {
        dl_tensor: dl,
        manager_ctx: Box::into_raw(p) as *mut c_void,
        deleter: Some(legacy_deleter),
    }))
}

fn produce_versioned(values: &[f32], major: u32) -> *mut DLManagedTensorVersioned {
    let mut p = Box::new(Produced {
        data: values.to_vec(),
        shape: [2, values.len() as i64 / 2],
    });
    let dl = produced_dl(&mut p, 0);
    Box::into_raw(Box::new(DLManagedTensorVersioned {
        version: DLPackVersion { major, minor: 0 },
        manager_ctx: Box::into_raw(p) as *mut c_void,
        deleter: Some(versioned_deleter),
        flags: 0,
        dl_tensor: dl,
    }))
}

fn adopt(out: *mut c_void) -> Tensor {
    // SAFETY: the C functions return one owned reference to a tensor object.
    Tensor(unsafe {
        kiln_ffi::ObjectRef::<TensorObj>::from_raw(NonNull::new(out as *mut _).unwrap())
    })
}

fn raised() -> Error {
    kiln_ffi::error::take_raised("test")
}

#[test]
fn dlpack_import_is_zero_copy_and_calls_the_deleter_once() {
    let _g = PRODUCER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let before = PRODUCER_DELETES.load(Ordering::SeqCst);
    for versioned in [false, true] {
        let mut out = std::ptr::null_mut();
        // SAFETY: the managed tensors are valid and owned by us until the import succeeds.
        let rc = unsafe {
            if versioned {
                TVMFFITensorFromDLPackVersioned(
                    produce_versioned(&[1.0, 2.0, 3.0, 4.0], 1),
                    0,
                    1,
                    &mut out,
                )
            } else {
                TVMFFITensorFromDLPack(produce_legacy(&[1.0, 2.0, 3.0, 4.0]), 0, 1, &mut out)
            }
        };
        assert_eq!(rc, 0);
        let t = adopt(out);
        assert_eq!(t.shape(), &[2, 2]);
        let producer_data = t.raw_data();
        // SAFETY: write through the producer's pointer, read through Kiln's tensor.
        unsafe { *(producer_data as *mut f32).add(3) = 40.0 };
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 40.0]);
        let v = t.view(&[4], DataType::float(32)).unwrap();
        drop(t);
        drop(v);
    }
    assert_eq!(PRODUCER_DELETES.load(Ordering::SeqCst), before + 2);
}

#[test]
fn dlpack_import_errors_leave_ownership_with_the_caller() {
    let _g = PRODUCER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let before = PRODUCER_DELETES.load(Ordering::SeqCst);
    let mut out = std::ptr::null_mut();
    let m = produce_versioned(&[1.0; 4], 2);
    assert_eq!(
        // SAFETY: a valid managed tensor with an unsupported major version.
        unsafe { TVMFFITensorFromDLPackVersioned(m, 0, 0, &mut out) },
        -1
    );
    let e = raised();
    assert!(e.message().contains("DLPack version 2.0"), "{e}");
    // SAFETY: still ours: release it.
    unsafe { versioned_deleter(m) };

    // Data that is not 64-byte aligned when 64 is required.
    let m = produce_legacy(&[1.0; 4]);
    // SAFETY: adjusting the metadata of a managed tensor we own, inside its buffer.
    unsafe {
        let base = (*m).dl_tensor.data as usize;
        (*m).dl_tensor.byte_offset = if !(base + 4).is_multiple_of(64) { 4 } else { 8 };
        (*m).dl_tensor.shape.add(1).write(1); // 2 x 1 elements after the offset
        assert_eq!(TVMFFITensorFromDLPack(m, 64, 0, &mut out), -1);
        let e = raised();
        assert_eq!(e.kind(), "ValueError");
        assert!(e.message().contains("not aligned to 64"), "{e}");
        assert_eq!(TVMFFITensorFromDLPack(m, -1, 0, &mut out), -1);
        assert!(raised().message().contains("negative"));
        // Negative dimension.
        (*m).dl_tensor.byte_offset = 0;
        (*m).dl_tensor.shape.write(-2);
        assert_eq!(TVMFFITensorFromDLPack(m, 0, 0, &mut out), -1);
        assert!(raised().message().contains("negative"));
        (*m).dl_tensor.shape.write(2);
        // Non-contiguous strides when contiguity is required.
        let mut strides = [1i64, 2];
        (*m).dl_tensor.shape.add(1).write(2);
        (*m).dl_tensor.strides = strides.as_mut_ptr();
        assert_eq!(TVMFFITensorFromDLPack(m, 0, 1, &mut out), -1);
        assert!(raised().message().contains("not contiguous"));
        (*m).dl_tensor.strides = std::ptr::null_mut();
        assert_eq!(
            TVMFFITensorFromDLPack(std::ptr::null_mut(), 0, 0, &mut out),
            -1
        );
        assert_eq!(raised().kind(), "ValueError");
        legacy_deleter(m);
    }
    assert_eq!(PRODUCER_DELETES.load(Ordering::SeqCst), before + 2);
}

#[test]
fn dlpack_export_shares_memory_and_round_trips() {
    let t = Tensor::from_slice(&[1u8, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    let handle = t.0.as_ptr().as_ptr() as *mut c_void;
    let mut legacy: *mut DLManagedTensor = std::ptr::null_mut();
    let mut versioned: *mut DLManagedTensorVersioned = std::ptr::null_mut();
    // SAFETY: t is a live tensor object; the exports are consumed below.
    unsafe {
        assert_eq!(TVMFFITensorToDLPack(handle, &mut legacy), 0);
        assert_eq!(TVMFFITensorToDLPackVersioned(handle, &mut versioned), 0);
        assert_eq!(t.0.strong_count(), 3);
        assert_eq!((*versioned).version.major, 1);
        assert_eq!((*versioned).flags, 0);
        assert_eq!((*legacy).dl_tensor.data, t.raw_data());
        *((*versioned).dl_tensor.data as *mut u8) = 100;
        assert_eq!(t.to_vec::<u8>().unwrap()[0], 100);
        // Importing Kiln's own export gives back the same tensor object.
        let mut out = std::ptr::null_mut();
        assert_eq!(TVMFFITensorFromDLPack(legacy, 64, 1, &mut out), 0);
        let back = adopt(out);
        assert!(back.same_as(&t));
        drop(back);
        // A consumer that is done calls the deleter.
        ((*versioned).deleter.unwrap())(versioned);
    }
    assert_eq!(t.0.strong_count(), 1);
    // Errors: NULL and a non-tensor object.
    let s: Any = kiln_ffi::Str::new("not a tensor at all").into();
    let sp = s.view().object_ptr().unwrap().as_ptr() as *mut c_void;
    // SAFETY: checked error paths.
    unsafe {
        assert_eq!(TVMFFITensorToDLPack(std::ptr::null_mut(), &mut legacy), -1);
        assert_eq!(raised().kind(), "ValueError");
        assert_eq!(TVMFFITensorToDLPack(sp, &mut legacy), -1);
        let e = raised();
        assert_eq!(e.kind(), "TypeError");
        assert!(e.message().contains("not an `ffi.Tensor`"), "{e}");
    }
}

#[test]
fn conversions_from_any_accept_objects_and_dltensor_pointers() {
    let t = Tensor::from_slice(&[3.0f32, 4.0], &[2]).unwrap();
    let any: Any = t.clone().into();
    assert_eq!(any.type_index(), 70);
    assert!(any.try_as::<Tensor>().unwrap().same_as(&t));
    // A DLTensor* argument becomes a non-owning view of the same memory.
    let ptr = t.as_dltensor_ptr();
    let f = kiln_ffi::registry::get("runtime.TensorFromDLTensor").unwrap();
    let view: Tensor = f.invoke((ptr,)).unwrap();
    assert!(!view.same_as(&t));
    assert_eq!(view.raw_data(), t.raw_data());
    view.copy_from_slice(&[5.0f32, 6.0]).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![5.0, 6.0]);
    let e = Any::from(1i64).try_as::<Tensor>().unwrap_err();
    assert!(e.message().contains("ffi.Tensor"), "{e}");
}

#[test]
fn globals_make_copy_and_view_tensors() {
    let get = |n: &str| kiln_ffi::registry::get(n).unwrap();
    let dtype: DataType = "int32".parse().unwrap();
    let t: Tensor = get("runtime.TensorEmpty")
        .invoke((Shape::new(&[2, 2]), dtype, cpu0()))
        .unwrap();
    assert_eq!(t.shape(), &[2, 2]);
    let arr: Array = vec![Any::from(3i64), Any::from(1i64)].into_iter().collect();
    let t2: Tensor = get("runtime.TensorEmpty")
        .invoke((arr, "float16", Any::none()))
        .unwrap();
    assert_eq!(t2.dtype().to_string(), "float16");
    assert_eq!(t2.device(), cpu0());
    let bytes: Vec<u8> = (1..=16).collect();
    get("runtime.TensorCopyFromBytes")
        .invoke::<()>((t.clone(), bytes.clone()))
        .unwrap();
    let back: Vec<u8> = get("runtime.TensorCopyToBytes")
        .invoke((t.clone(),))
        .unwrap();
    assert_eq!(back, bytes);
    let v: Tensor = get("runtime.TensorView")
        .invoke((t.clone(), Shape::new(&[16]), DataType::uint(8)))
        .unwrap();
    assert_eq!(v.to_vec::<u8>().unwrap(), bytes);
    let dst = Tensor::empty(&[2, 2], dtype, cpu0()).unwrap();
    get("runtime.TensorCopyFromTo")
        .invoke::<()>((t.clone(), dst.clone()))
        .unwrap();
    assert_eq!(dst.to_bytes().unwrap(), bytes);

    let e = expect_err(
        get("runtime.TensorEmpty").invoke::<Tensor>(("2x2", dtype, cpu0())),
        "TypeError",
        "",
    );
    assert!(e.message().contains("expected a shape"), "{e}");
    let e = get("runtime.TensorCopyFromBytes")
        .invoke::<()>((t.clone(), vec![0u8; 3]))
        .unwrap_err();
    assert!(e.message().contains("16 bytes but got 3"), "{e}");
    let e = get("runtime.TensorCopyFromBytes")
        .invoke::<()>((t, 5i64))
        .unwrap_err();
    assert!(e.message().contains("argument #1"), "{e}");
}
