/*
 * kiln/dlpack.h -- the DLPack data structures Kiln's C API uses.
 *
 * Part of Kiln, licensed under the Apache License, Version 2.0.
 *
 * DLPack is a small, vendor-neutral description of an n-dimensional array
 * living in some device's memory.  Kiln's C header needs a handful of its
 * types (element type, device, tensor view and the two "managed" wrappers).
 * This file spells out those types so that <kiln/c_api.h> stands on its own.
 * The memory layout matches DLPack 1.x exactly; compile-time checks at the
 * bottom guard the sizes and offsets that other runtimes rely on.
 *
 * It shares its include guard with the upstream dlpack/dlpack.h, so a
 * translation unit that pulls in both only ever sees one set of definitions.
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

/* Version of the DLPack protocol these layouts correspond to. */
#ifndef DLPACK_MAJOR_VERSION
#define DLPACK_MAJOR_VERSION 1
#endif
#ifndef DLPACK_MINOR_VERSION
#define DLPACK_MINOR_VERSION 3
#endif

#ifndef DLPACK_DLL
#define DLPACK_DLL
#endif

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
extern "C" {
#else
#define DLPACK_EXTERN_C
#endif

/* Protocol version carried by a versioned managed tensor. */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/* Kind of device a buffer lives on (stored as a 32-bit int). */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18,
} DLDeviceType;

/* A device: its kind plus an ordinal among devices of that kind. */
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

/* Values of DLDataType.code. */
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U,
} DLDataTypeCode;

/*
 * Element type, packed into 4 bytes: a DLDataTypeCode, the width of one lane
 * in bits, and the number of lanes (1 for scalars, >1 for short vectors).
 */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/*
 * A non-owning view of an n-dimensional array.
 *   data        base pointer (device address for non-CPU devices)
 *   shape       ndim extents
 *   strides     ndim strides counted in elements, or NULL for row-major
 *   byte_offset added to data to reach the first element
 */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/* A DLTensor bundled with the callback that releases it (DLPack 0.x style). */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

/* Bits of DLManagedTensorVersioned.flags. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/* The DLPack 1.x managed tensor: carries a version and flags up front. */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}
#endif

/* ---- layout guards (64-bit targets) ----------------------------------- */
#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && \
    UINTPTR_MAX == 0xffffffffffffffffu
_Static_assert(sizeof(DLPackVersion) == 8, "DLPackVersion must be 8 bytes");
_Static_assert(sizeof(DLDevice) == 8, "DLDevice must be 8 bytes");
_Static_assert(offsetof(DLDevice, device_id) == 4, "DLDevice.device_id at 4");
_Static_assert(sizeof(DLDataType) == 4, "DLDataType must be 4 bytes");
_Static_assert(offsetof(DLDataType, bits) == 1, "DLDataType.bits at 1");
_Static_assert(offsetof(DLDataType, lanes) == 2, "DLDataType.lanes at 2");
_Static_assert(sizeof(DLTensor) == 48, "DLTensor must be 48 bytes");
_Static_assert(offsetof(DLTensor, data) == 0, "DLTensor.data at 0");
_Static_assert(offsetof(DLTensor, device) == 8, "DLTensor.device at 8");
_Static_assert(offsetof(DLTensor, ndim) == 16, "DLTensor.ndim at 16");
_Static_assert(offsetof(DLTensor, dtype) == 20, "DLTensor.dtype at 20");
_Static_assert(offsetof(DLTensor, shape) == 24, "DLTensor.shape at 24");
_Static_assert(offsetof(DLTensor, strides) == 32, "DLTensor.strides at 32");
_Static_assert(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset at 40");
_Static_assert(sizeof(DLManagedTensor) == 64, "DLManagedTensor must be 64 bytes");
_Static_assert(offsetof(DLManagedTensor, manager_ctx) == 48, "DLManagedTensor.manager_ctx at 48");
_Static_assert(offsetof(DLManagedTensor, deleter) == 56, "DLManagedTensor.deleter at 56");
_Static_assert(sizeof(DLManagedTensorVersioned) == 80, "DLManagedTensorVersioned must be 80 bytes");
_Static_assert(offsetof(DLManagedTensorVersioned, manager_ctx) == 8, "manager_ctx at 8");
_Static_assert(offsetof(DLManagedTensorVersioned, deleter) == 16, "deleter at 16");
_Static_assert(offsetof(DLManagedTensorVersioned, flags) == 24, "flags at 24");
_Static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 32, "dl_tensor at 32");
#endif

#endif /* DLPACK_DLPACK_H_ */
