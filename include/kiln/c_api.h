/*
 * kiln/c_api.h -- the C interface of Kiln's runtime library (libkiln_runtime).
 *
 * Part of Kiln, licensed under the Apache License, Version 2.0.
 *
 * Kiln's runtime speaks the Apache TVM-FFI binary interface.  Everything in
 * this file -- type names, field order, sizes, enum values and function
 * signatures -- is chosen so that a C program written against TVM-FFI's
 * <tvm/ffi/c_api.h> compiles against this header without edits, and a binary
 * built against either header runs against either library.  Only the subset
 * of the interface that Kiln implements is declared here.
 *
 * Quick tour
 * ----------
 *  * Every value crossing the boundary is a 16-byte TVMFFIAny: a type index,
 *    four bytes that are zero (or hold the length of an inline string), and an
 *    8-byte payload.  Type indices below 64 are plain values carried in the
 *    payload; 64 and above are reference-counted heap objects and the payload
 *    is a TVMFFIObject*.
 *  * Every heap object begins with the 24-byte TVMFFIObject header.  Its
 *    kind-specific data (a "cell") follows immediately, at offset 24.
 *  * Every callable is a Function object whose cell holds a TVMFFISafeCallType
 *    entry point.  Calls return 0 on success or -1 after leaving an Error
 *    object in a per-thread slot, from where TVMFFIErrorMoveFromRaised takes it.
 *  * Ownership: a TVMFFIAny written by the library into an out-parameter (a
 *    call result, a conversion result) owns one reference when it holds an
 *    object; release it with TVMFFIObjectDecRef.  Arguments passed to a call
 *    are borrowed: the callee adds its own references if it keeps them.
 */
#ifndef KILN_C_API_H_
#define KILN_C_API_H_

/* If TVM-FFI's own header was already included, its definitions are the same
 * as ours, so we contribute nothing; likewise we block it after ourselves. */
#ifndef TVM_FFI_C_API_H_
#define TVM_FFI_C_API_H_

#include <stddef.h>
#include <stdint.h>

#include "dlpack.h"

/* ---- linkage and version ------------------------------------------------ */

#ifndef TVM_FFI_DLL
#if defined(_MSC_VER)
#ifdef TVM_FFI_EXPORTS
#define TVM_FFI_DLL __declspec(dllexport)
#else
#define TVM_FFI_DLL __declspec(dllimport)
#endif
#define TVM_FFI_DLL_EXPORT __declspec(dllexport)
#else
#define TVM_FFI_DLL __attribute__((visibility("default")))
#define TVM_FFI_DLL_EXPORT __attribute__((visibility("default")))
#endif
#endif

#ifndef TVM_FFI_WEAK
#if defined(_MSC_VER)
#define TVM_FFI_WEAK __declspec(selectany)
#else
#define TVM_FFI_WEAK __attribute__((weak))
#endif
#endif

#ifndef TVM_FFI_ATTRIBUTE_PURE
#if defined(__GNUC__) || defined(__clang__)
#define TVM_FFI_ATTRIBUTE_PURE __attribute__((__pure__))
#else
#define TVM_FFI_ATTRIBUTE_PURE
#endif
#endif

/* The TVM-FFI interface version this header describes. */
#define TVM_FFI_VERSION_MAJOR 0
#define TVM_FFI_VERSION_MINOR 1
#define TVM_FFI_VERSION_PATCH 16

/* Marks this header as Kiln's (TVM-FFI's header does not define it). */
#define KILN_C_API 1

#ifdef __cplusplus
extern "C" {
#endif

/* Filled in by TVMFFIGetVersion. */
typedef struct {
  uint32_t major;
  uint32_t minor;
  uint32_t patch;
} TVMFFIVersion;

/* ---- type indices ------------------------------------------------------- */

/*
 * What a TVMFFIAny holds, and what kind of object a TVMFFIObject is.
 *   0 .. 63     plain values stored inside the TVMFFIAny payload
 *   64 .. 127   object kinds built into every runtime
 *   128 ..      object kinds registered while the program runs
 */
#ifdef __cplusplus
enum TVMFFITypeIndex : int32_t {
#else
typedef enum {
#endif
  kTVMFFIAny = -1,             /* wildcard, used only in type descriptions */
  kTVMFFINone = 0,             /* no value; payload is zero */
  kTVMFFIInt = 1,              /* v_int64 */
  kTVMFFIBool = 2,             /* v_int64, 0 or 1 */
  kTVMFFIFloat = 3,            /* v_float64 */
  kTVMFFIOpaquePtr = 4,        /* v_ptr, not interpreted */
  kTVMFFIDataType = 5,         /* v_dtype */
  kTVMFFIDevice = 6,           /* v_device */
  kTVMFFIDLTensorPtr = 7,      /* v_ptr is a borrowed DLTensor* */
  kTVMFFIRawStr = 8,           /* v_c_str, borrowed NUL-terminated text */
  kTVMFFIByteArrayPtr = 9,     /* v_ptr is a borrowed TVMFFIByteArray* */
  kTVMFFIObjectRValueRef = 10, /* v_ptr points at an object slot to move from */
  kTVMFFISmallStr = 11,        /* up to 7 bytes of text inline in v_bytes */
  kTVMFFISmallBytes = 12,      /* up to 7 raw bytes inline in v_bytes */
  kTVMFFIUnchanged = 13,       /* sentinel: "leave this field as it is" */
  kTVMFFIStaticObjectBegin = 64,
  kTVMFFIObject = 64,          /* root of the object hierarchy */
  kTVMFFIStr = 65,             /* cell: TVMFFIByteArray */
  kTVMFFIBytes = 66,           /* cell: TVMFFIByteArray */
  kTVMFFIError = 67,           /* cell: TVMFFIErrorCell */
  kTVMFFIFunction = 68,        /* cell: TVMFFIFunctionCell */
  kTVMFFIShape = 69,           /* cell: TVMFFIShapeCell */
  kTVMFFITensor = 70,          /* cell: DLTensor */
  kTVMFFIArray = 71,           /* cell: TVMFFISeqCell (immutable) */
  kTVMFFIMap = 72,
  kTVMFFIModule = 73,
  kTVMFFIOpaquePyObject = 74,  /* cell: TVMFFIOpaqueObjectCell */
  kTVMFFIList = 75,            /* cell: TVMFFISeqCell (mutable) */
  kTVMFFIDict = 76,
  kTVMFFIVisitInterrupt = 77,
  kTVMFFIBigInt = 78,
  kTVMFFIStaticObjectEnd,
  kTVMFFIDynObjectBegin = 128
#ifdef __cplusplus
};
#else
} TVMFFITypeIndex;
#endif

/* ---- objects ------------------------------------------------------------ */

/* An opaque pointer to an object (its TVMFFIObject header). */
typedef void* TVMFFIObjectHandle;

/* The `flags` argument of an object's deleter says which part to release. */
#ifdef __cplusplus
enum TVMFFIObjectDeleterFlagBitMask : int32_t {
#else
typedef enum {
#endif
  kTVMFFIObjectDeleterFlagBitMaskStrong = 1 << 0, /* last strong ref gone: destroy contents */
  kTVMFFIObjectDeleterFlagBitMaskWeak = 1 << 1,   /* last weak ref gone: free memory */
  kTVMFFIObjectDeleterFlagBitMaskBoth =
      (kTVMFFIObjectDeleterFlagBitMaskStrong | kTVMFFIObjectDeleterFlagBitMaskWeak),
#ifdef __cplusplus
};
#else
} TVMFFIObjectDeleterFlagBitMask;
#endif

/*
 * Header at the start of every heap object (24 bytes).
 *   combined_ref_count  low 32 bits: strong references; high 32 bits: weak
 *                       references.  Updated atomically by the runtime; use
 *                       TVMFFIObjectIncRef/DecRef rather than touching it.
 *   type_index          a TVMFFITypeIndex value or a registered index >= 128
 *   deleter             called by the runtime when counts reach zero
 */
typedef struct {
  uint64_t combined_ref_count;
  int32_t type_index;
  uint32_t __padding;
  union {
    void (*deleter)(void* self, int flags);
    int64_t __ensure_align;
  };
} TVMFFIObject;

/* ---- the universal value ------------------------------------------------- */

/*
 * One value (16 bytes).  Read `type_index` first, then the payload member it
 * names.  The second word is zero except for inline strings/bytes, where it is
 * the byte count (at most 7; v_bytes is NUL-terminated for small strings).
 * When writing a plain value, clear v_int64 first so unused payload bytes are
 * zero.
 */
typedef struct {
  int32_t type_index;
  union {
    uint32_t zero_padding;
    uint32_t small_str_len;
  };
  union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
    const char* v_c_str;
    TVMFFIObject* v_obj;
    DLDataType v_dtype;
    DLDevice v_device;
    char v_bytes[8];
    uint64_t v_uint64;
  };
} TVMFFIAny;

/* A borrowed run of bytes (not necessarily NUL-terminated). */
typedef struct {
  const char* data;
  size_t size;
} TVMFFIByteArray;

/* Cell of a Shape object: `size` int64 extents at `data`. */
typedef struct {
  const int64_t* data;
  size_t size;
} TVMFFIShapeCell;

/*
 * Cell of an Array or List object: `data` points at `capacity` TVMFFIAny
 * slots of which the first `size` are in use.  `data_deleter`, when not NULL,
 * frees `data` separately from the object.
 */
#ifdef __cplusplus
struct TVMFFISeqCell {
#else
typedef struct {
#endif
  void* data;
  int64_t size;
  int64_t capacity;
  void (*data_deleter)(void*);
#ifdef __cplusplus
};
#else
} TVMFFISeqCell;
#endif

/* How TVMFFIErrorCell.update_backtrace combines old and new backtraces. */
#ifdef __cplusplus
enum TVMFFIBacktraceUpdateMode : int32_t {
#else
typedef enum {
#endif
  kTVMFFIBacktraceUpdateModeReplace = 0,
  kTVMFFIBacktraceUpdateModeAppend = 1,
#ifdef __cplusplus
};
#else
} TVMFFIBacktraceUpdateMode;
#endif

/*
 * Cell of an Error object.
 *   kind        the error class, e.g. "ValueError", "TypeError"
 *   message     human-readable text
 *   backtrace   accumulated backtrace text (may be empty)
 *   update_backtrace  lets a runtime extend `backtrace` as the error unwinds
 *   cause_chain optional Error object that caused this one (or NULL)
 *   extra_context optional object with additional information (or NULL)
 */
typedef struct {
  TVMFFIByteArray kind;
  TVMFFIByteArray message;
  TVMFFIByteArray backtrace;
  void (*update_backtrace)(TVMFFIObjectHandle self, const TVMFFIByteArray* backtrace,
                           int32_t update_mode);
  TVMFFIObjectHandle cause_chain;
  TVMFFIObjectHandle extra_context;
} TVMFFIErrorCell;

/*
 * The calling convention shared by every function.
 *   handle    when called through a Function's cell: the Function object;
 *             a callback passed to TVMFFIFunctionCreate receives the `self`
 *             given there instead (do not rely on it when that was NULL)
 *   args      num_args borrowed arguments
 *   result    set to None by the caller; the callee stores an owned value
 * Returns 0 on success, -1 after raising an error (TVMFFIErrorSetRaised*).
 */
typedef int (*TVMFFISafeCallType)(void* handle, const TVMFFIAny* args, int32_t num_args,
                                  TVMFFIAny* result);

/* Cell of a Function object.  `safe_call` is invoked with the Function object
 * itself as `handle`.  `cpp_call` is a C++-only fast path (same arguments,
 * errors thrown as C++ exceptions); it is NULL for every function not written
 * in C++, including all functions made by Kiln and by TVMFFIFunctionCreate. */
typedef struct {
  TVMFFISafeCallType safe_call;
  void* cpp_call;
} TVMFFIFunctionCell;

/* Cell of an opaque foreign-object wrapper. */
typedef struct {
  void* handle;
} TVMFFIOpaqueObjectCell;

/* ---- type reflection records ------------------------------------------- */

typedef int (*TVMFFIFieldGetter)(void* field, TVMFFIAny* result);
typedef int (*TVMFFIFieldSetter)(void* field, const TVMFFIAny* value);
typedef int (*TVMFFIObjectCreator)(TVMFFIObjectHandle* result);

/* Bits of TVMFFIFieldInfo.flags / TVMFFIMethodInfo.flags. */
#ifdef __cplusplus
enum TVMFFIFieldFlagBitMask : int32_t {
#else
typedef enum {
#endif
  kTVMFFIFieldFlagBitMaskWritable = 1 << 0,
  kTVMFFIFieldFlagBitMaskHasDefault = 1 << 1,
  kTVMFFIFieldFlagBitMaskIsStaticMethod = 1 << 2,
  kTVMFFIFieldFlagBitMaskSEqHashIgnore = 1 << 3,
  kTVMFFIFieldFlagBitMaskSEqHashDefPattern = 1 << 4,
  kTVMFFIFieldFlagBitMaskDefaultFromFactory = 1 << 5,
  kTVMFFIFieldFlagBitMaskReprOff = 1 << 6,
  kTVMFFIFieldFlagBitMaskCompareOff = 1 << 7,
  kTVMFFIFieldFlagBitMaskHashOff = 1 << 8,
  kTVMFFIFieldFlagBitMaskInitOff = 1 << 9,
  kTVMFFIFieldFlagBitMaskKwOnly = 1 << 10,
  kTVMFFIFieldFlagBitSetterIsFunctionObj = 1 << 11,
  kTVMFFIFieldFlagBitMaskSEqHashDefSimple = 1 << 12,
#ifdef __cplusplus
};
#else
} TVMFFIFieldFlagBitMask;
#endif

/* How structural equality/hashing treats objects of a type. */
#ifdef __cplusplus
enum TVMFFISEqHashKind : int32_t {
#else
typedef enum {
#endif
  kTVMFFISEqHashKindUnsupported = 0,
  kTVMFFISEqHashKindTreeNode = 1,
  kTVMFFISEqHashKindFreeVar = 2,
  kTVMFFISEqHashKindDAGNode = 3,
  kTVMFFISEqHashKindConstTreeNode = 4,
  kTVMFFISEqHashKindUniqueInstance = 5,
#ifdef __cplusplus
};
#else
} TVMFFISEqHashKind;
#endif

/* One reflected field of an object type. */
typedef struct {
  TVMFFIByteArray name;
  TVMFFIByteArray doc;
  TVMFFIByteArray metadata;
  int64_t flags;
  int64_t size;
  int64_t alignment;
  int64_t offset; /* byte offset from the start of the object */
  TVMFFIFieldGetter getter;
  void* setter;   /* TVMFFIFieldSetter, or a Function object (see flags) */
  TVMFFIAny default_value_or_factory;
  int32_t field_static_type_index;
} TVMFFIFieldInfo;

/* One reflected method of an object type. */
typedef struct {
  TVMFFIByteArray name;
  TVMFFIByteArray doc;
  TVMFFIByteArray metadata;
  int64_t flags;
  TVMFFIAny method; /* a Function */
} TVMFFIMethodInfo;

/* Extra facts about a type. */
typedef struct {
  TVMFFIByteArray doc;
  TVMFFIObjectCreator creator;
  int32_t total_size;
  TVMFFISEqHashKind structural_eq_hash_kind;
} TVMFFITypeMetadata;

/*
 * Everything the runtime knows about one type.  `type_ancestors` lists
 * `type_depth` entries, from the root (ffi.Object, depth 0) down to the
 * direct parent.
 */
#ifdef __cplusplus
struct TVMFFITypeInfo {
#else
typedef struct TVMFFITypeInfo {
#endif
  int32_t type_index;
  int32_t type_depth;
  TVMFFIByteArray type_key;
  const struct TVMFFITypeInfo** type_ancestors;
  uint64_t type_key_hash;
  int32_t num_fields;
  int32_t num_methods;
  const TVMFFIFieldInfo* fields;
  const TVMFFIMethodInfo* methods;
  const TVMFFITypeMetadata* metadata;
#ifdef __cplusplus
};
#else
} TVMFFITypeInfo;
#endif

/* ---- functions exported by libkiln_runtime ------------------------------ */

/* Reports the interface version the library implements. */
TVM_FFI_DLL void TVMFFIGetVersion(TVMFFIVersion* out_version);

/* Add / drop one strong reference.  Dropping the last one runs the deleter.
 * Both return 0. */
TVM_FFI_DLL int TVMFFIObjectIncRef(TVMFFIObjectHandle obj);
TVM_FFI_DLL int TVMFFIObjectDecRef(TVMFFIObjectHandle obj);

/* Looks up the index of a type by its key (e.g. "ffi.String" -> 65). */
TVM_FFI_DLL int TVMFFITypeKeyToIndex(const TVMFFIByteArray* type_key, int32_t* out_tindex);

/* Wraps a C entry point as a Function object (one owned reference in *out).
 * `deleter`, if not NULL, receives `self` once the Function is destroyed. */
TVM_FFI_DLL int TVMFFIFunctionCreate(void* self, TVMFFISafeCallType safe_call,
                                     void (*deleter)(void* self), TVMFFIObjectHandle* out);

/* Fetches a global function by name; *out is an owned reference, or NULL
 * when no function has that name. */
TVM_FFI_DLL int TVMFFIFunctionGetGlobal(const TVMFFIByteArray* name, TVMFFIObjectHandle* out);

/* Registers `f` under `name` (the registry keeps its own reference).  Fails
 * if the name is taken and allow_override is 0. */
TVM_FFI_DLL int TVMFFIFunctionSetGlobal(const TVMFFIByteArray* name, TVMFFIObjectHandle f,
                                        int allow_override);

/* Turns a borrowed value into an owned one: objects gain a reference, raw C
 * strings and byte-array pointers become String / Bytes values. */
TVM_FFI_DLL int TVMFFIAnyViewToOwnedAny(const TVMFFIAny* any_view, TVMFFIAny* out);

/* Calls a Function.  Set *result to None beforehand; on success it holds an
 * owned value.  Returns -1 with an error raised on failure. */
TVM_FFI_DLL int TVMFFIFunctionCall(TVMFFIObjectHandle func, TVMFFIAny* args, int32_t num_args,
                                   TVMFFIAny* result);

/* Removes the error raised on this thread and hands it to the caller (an
 * owned reference), or stores NULL when none is pending. */
TVM_FFI_DLL void TVMFFIErrorMoveFromRaised(TVMFFIObjectHandle* result);

/* Raises an existing Error object on this thread (adds a reference). */
TVM_FFI_DLL void TVMFFIErrorSetRaised(TVMFFIObjectHandle error);

/* Creates and raises an Error from a kind and a NUL-terminated message. */
TVM_FFI_DLL void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message);

/* Same, with the message given as `num_parts` pieces to concatenate; NULL
 * pieces are skipped.  (Code generated by TVM imports this one symbol.) */
TVM_FFI_DLL void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** message_parts,
                                                   int32_t num_parts);

/* Creates an Error object without raising it. */
TVM_FFI_DLL int TVMFFIErrorCreate(const TVMFFIByteArray* kind, const TVMFFIByteArray* message,
                                  const TVMFFIByteArray* backtrace, TVMFFIObjectHandle* out);

/* Builds a String value: inline (type 11) when it fits in 7 bytes,
 * otherwise a Str object (type 65). */
TVM_FFI_DLL int TVMFFIStringFromByteArray(const TVMFFIByteArray* input, TVMFFIAny* out);

/* Builds a Bytes value: inline (type 12) up to 7 bytes, else an object (66). */
TVM_FFI_DLL int TVMFFIBytesFromByteArray(const TVMFFIByteArray* input, TVMFFIAny* out);

/* Parses a data type name such as "int32", "float16x4" or "bool". */
TVM_FFI_DLL int TVMFFIDataTypeFromString(const TVMFFIByteArray* str, DLDataType* out);

/* Formats a data type as text.  *out always receives a Str object (type 65,
 * even for short names such as "int8"); release it with TVMFFIObjectDecRef. */
TVM_FFI_DLL int TVMFFIDataTypeToString(const DLDataType* dtype, TVMFFIAny* out);

/* Describes a registered type, or returns NULL for an unknown index. */
TVM_FFI_DLL TVM_FFI_ATTRIBUTE_PURE const TVMFFITypeInfo* TVMFFIGetTypeInfo(int32_t type_index);

/* Thread-safe lazy initialisation: if *handle_addr is NULL, runs init_func
 * exactly once across threads and publishes what it produced. */
TVM_FFI_DLL int TVMFFIHandleInitOnce(void** handle_addr, int (*init_func)(void** result));

/* Runs deinit_func on *handle_addr once (if it is set) and clears it. */
TVM_FFI_DLL int TVMFFIHandleDeinitOnce(void** handle_addr, int (*deinit_func)(void* handle));

/* ---- tensors (ffi.Tensor, type 70: the DLTensor sits right after the header) ---- */

/* Wraps a DLPack tensor without copying; the tensor calls from->deleter when freed.
 * require_alignment (bytes, 0 = any) and require_contiguous are checked first. */
TVM_FFI_DLL int TVMFFITensorFromDLPack(DLManagedTensor* from, int32_t require_alignment,
                                       int32_t require_contiguous, TVMFFIObjectHandle* out);
/* Exports a tensor as a DLPack tensor that keeps it alive until its deleter runs. */
TVM_FFI_DLL int TVMFFITensorToDLPack(TVMFFIObjectHandle from, DLManagedTensor** out);
/* The same for DLPack 1.x versioned tensors. */
TVM_FFI_DLL int TVMFFITensorFromDLPackVersioned(DLManagedTensorVersioned* from,
                                                int32_t require_alignment,
                                                int32_t require_contiguous,
                                                TVMFFIObjectHandle* out);
TVM_FFI_DLL int TVMFFITensorToDLPackVersioned(TVMFFIObjectHandle from,
                                              DLManagedTensorVersioned** out);
/* A view of source's memory described by prototype (shape, dtype, strides, offset),
 * keeping source alive; sizes are not checked. */
TVM_FFI_DLL int TVMFFITensorCreateUnsafeView(TVMFFIObjectHandle source, const DLTensor* prototype,
                                             TVMFFIObjectHandle* out);

/* ---- services for compiled code (Apache TVM 0.27 names and signatures) ---- */

/* Finds `name` among the imports of the module whose context is library_ctx, then in the
 * global registry; *out receives a new function reference. */
TVM_FFI_DLL int TVMFFIEnvModLookupFromImports(void* library_ctx, const char* name, void** out);

/* Per-thread scratch memory, 64-byte aligned, freed in stack order. */
TVM_FFI_DLL void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                                           int dtype_code_hint, int dtype_bits_hint);
TVM_FFI_DLL int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr);

/* The environment of a parallel launch: an opaque synchronisation handle and the task count. */
typedef struct {
  void* sync_handle;
  int32_t num_task;
} TVMParallelGroupEnv;

/* Runs flambda(task_id, env, cdata) for task ids 0..num_task-1 on the thread pool
 * (num_task 0: one task per pool thread); returns non-zero if a task failed. */
TVM_FFI_DLL int TVMBackendParallelLaunch(int (*flambda)(int task_id, TVMParallelGroupEnv* penv,
                                                        void* cdata),
                                         void* cdata, int num_task);
/* Waits until every task of the launch reaches the barrier. */
TVM_FFI_DLL int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv);

#ifdef __cplusplus
}
#endif

/* ---- inline helpers ----------------------------------------------------- */
/* Every object cell sits directly after the 24-byte header. */

#ifdef __cplusplus
#define KILN_FFI_INLINE inline
#else
#define KILN_FFI_INLINE static inline
#endif

KILN_FFI_INLINE int32_t TVMFFIObjectGetTypeIndex(TVMFFIObjectHandle obj) {
  return ((TVMFFIObject*)obj)->type_index;
}

KILN_FFI_INLINE void* KilnFFIObjectCell(TVMFFIObjectHandle obj) {
  return (void*)((char*)obj + sizeof(TVMFFIObject));
}

KILN_FFI_INLINE TVMFFIByteArray TVMFFISmallBytesGetContentByteArray(const TVMFFIAny* value) {
  TVMFFIByteArray out;
  out.data = value->v_bytes;
  out.size = (size_t)value->small_str_len;
  return out;
}

KILN_FFI_INLINE TVMFFIByteArray* TVMFFIBytesGetByteArrayPtr(TVMFFIObjectHandle obj) {
  return (TVMFFIByteArray*)KilnFFIObjectCell(obj);
}

KILN_FFI_INLINE TVMFFIErrorCell* TVMFFIErrorGetCellPtr(TVMFFIObjectHandle obj) {
  return (TVMFFIErrorCell*)KilnFFIObjectCell(obj);
}

KILN_FFI_INLINE TVMFFIFunctionCell* TVMFFIFunctionGetCellPtr(TVMFFIObjectHandle obj) {
  return (TVMFFIFunctionCell*)KilnFFIObjectCell(obj);
}

KILN_FFI_INLINE TVMFFIOpaqueObjectCell* TVMFFIOpaqueObjectGetCellPtr(TVMFFIObjectHandle obj) {
  return (TVMFFIOpaqueObjectCell*)KilnFFIObjectCell(obj);
}

KILN_FFI_INLINE TVMFFIShapeCell* TVMFFIShapeGetCellPtr(TVMFFIObjectHandle obj) {
  return (TVMFFIShapeCell*)KilnFFIObjectCell(obj);
}

KILN_FFI_INLINE TVMFFISeqCell* KilnFFISeqGetCellPtr(TVMFFIObjectHandle obj) {
  return (TVMFFISeqCell*)KilnFFIObjectCell(obj);
}

KILN_FFI_INLINE DLTensor* TVMFFITensorGetDLTensorPtr(TVMFFIObjectHandle obj) {
  return (DLTensor*)KilnFFIObjectCell(obj);
}

KILN_FFI_INLINE DLDevice TVMFFIDLDeviceFromIntPair(int32_t device_type, int32_t device_id) {
  DLDevice dev;
  dev.device_type = (DLDeviceType)device_type;
  dev.device_id = device_id;
  return dev;
}

/* ---- layout guards (64-bit targets) ----------------------------------- */
#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && \
    UINTPTR_MAX == 0xffffffffffffffffu
_Static_assert(sizeof(TVMFFIVersion) == 12, "TVMFFIVersion is three u32");
_Static_assert(sizeof(TVMFFITypeIndex) == 4, "type indices are 32-bit");
_Static_assert(sizeof(TVMFFIObject) == 24, "object header must be 24 bytes");
_Static_assert(offsetof(TVMFFIObject, combined_ref_count) == 0, "ref count at 0");
_Static_assert(offsetof(TVMFFIObject, type_index) == 8, "object type_index at 8");
_Static_assert(offsetof(TVMFFIObject, deleter) == 16, "deleter at 16");
_Static_assert(sizeof(TVMFFIAny) == 16, "TVMFFIAny must be 16 bytes");
_Static_assert(offsetof(TVMFFIAny, type_index) == 0, "Any.type_index at 0");
_Static_assert(offsetof(TVMFFIAny, zero_padding) == 4, "Any.zero_padding at 4");
_Static_assert(offsetof(TVMFFIAny, small_str_len) == 4, "Any.small_str_len at 4");
_Static_assert(offsetof(TVMFFIAny, v_int64) == 8, "Any payload at 8");
_Static_assert(offsetof(TVMFFIAny, v_dtype) == 8, "Any.v_dtype at 8");
_Static_assert(offsetof(TVMFFIAny, v_device) == 8, "Any.v_device at 8");
_Static_assert(offsetof(TVMFFIAny, v_bytes) == 8, "Any.v_bytes at 8");
_Static_assert(sizeof(TVMFFIByteArray) == 16, "TVMFFIByteArray is {ptr, size}");
_Static_assert(offsetof(TVMFFIByteArray, size) == 8, "ByteArray.size at 8");
_Static_assert(sizeof(TVMFFIShapeCell) == 16, "TVMFFIShapeCell is {ptr, size}");
_Static_assert(sizeof(TVMFFISeqCell) == 32, "TVMFFISeqCell is four words");
_Static_assert(offsetof(TVMFFISeqCell, size) == 8, "SeqCell.size at 8");
_Static_assert(offsetof(TVMFFISeqCell, capacity) == 16, "SeqCell.capacity at 16");
_Static_assert(offsetof(TVMFFISeqCell, data_deleter) == 24, "SeqCell.data_deleter at 24");
_Static_assert(sizeof(TVMFFIErrorCell) == 72, "TVMFFIErrorCell must be 72 bytes");
_Static_assert(offsetof(TVMFFIErrorCell, message) == 16, "ErrorCell.message at 16");
_Static_assert(offsetof(TVMFFIErrorCell, backtrace) == 32, "ErrorCell.backtrace at 32");
_Static_assert(offsetof(TVMFFIErrorCell, update_backtrace) == 48, "update_backtrace at 48");
_Static_assert(offsetof(TVMFFIErrorCell, cause_chain) == 56, "cause_chain at 56");
_Static_assert(offsetof(TVMFFIErrorCell, extra_context) == 64, "extra_context at 64");
_Static_assert(sizeof(TVMFFIFunctionCell) == 16, "TVMFFIFunctionCell is two pointers");
_Static_assert(offsetof(TVMFFIFunctionCell, cpp_call) == 8, "FunctionCell.cpp_call at 8");
_Static_assert(sizeof(TVMFFIFieldInfo) == 120, "TVMFFIFieldInfo must be 120 bytes");
_Static_assert(offsetof(TVMFFIFieldInfo, default_value_or_factory) == 96, "default at 96");
_Static_assert(sizeof(TVMFFIMethodInfo) == 72, "TVMFFIMethodInfo must be 72 bytes");
_Static_assert(sizeof(TVMFFITypeMetadata) == 32, "TVMFFITypeMetadata must be 32 bytes");
_Static_assert(sizeof(TVMFFITypeInfo) == 72, "TVMFFITypeInfo must be 72 bytes");
_Static_assert(offsetof(TVMFFITypeInfo, type_key) == 8, "TypeInfo.type_key at 8");
_Static_assert(offsetof(TVMFFITypeInfo, type_ancestors) == 24, "type_ancestors at 24");
_Static_assert(offsetof(TVMFFITypeInfo, type_key_hash) == 32, "type_key_hash at 32");
_Static_assert(offsetof(TVMFFITypeInfo, num_fields) == 40, "num_fields at 40");
_Static_assert(offsetof(TVMFFITypeInfo, fields) == 48, "fields at 48");
_Static_assert(offsetof(TVMFFITypeInfo, metadata) == 64, "metadata at 64");
#endif

#endif /* TVM_FFI_C_API_H_ */
#endif /* KILN_C_API_H_ */
