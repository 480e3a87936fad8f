/* A library shaped like Apache TVM 0.27 output, for Kiln's module tests (Rust and Python):
 * __tvm_ffi_<name> safe-call functions, the eight context slots, __tvm_ffi__library_ctx, and
 * errors through TVMFFIErrorSetRaisedFromCStrParts (its only import). */
#include <stdint.h>
#include <stddef.h>
typedef struct { int32_t type_index; uint32_t small_len; union { int64_t i; double f; void* p; } v; } Any;
typedef struct { void* sync_handle; int32_t num_task; } GroupEnv;
extern void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** parts, int32_t n);
void* __tvm_ffi__library_ctx = NULL;
int (*__TVMFFIFunctionCall)(void*, Any*, int32_t, Any*) = NULL;
void (*__TVMFFIErrorSetRaisedFromCStr)(const char*, const char*) = NULL;
int (*__TVMFFIEnvModLookupFromImports)(void*, const char*, void**) = NULL;
int (*__TVMFFIHandleInitOnce)(void**, int (*)(void**)) = NULL;
void* (*__TVMBackendAllocWorkspace)(int, int, uint64_t, int, int) = NULL;
int (*__TVMBackendFreeWorkspace)(int, int, void*) = NULL;
int (*__TVMBackendParallelLaunch)(int (*)(int, GroupEnv*, void*), void*, int) = NULL;
int (*__TVMBackendParallelBarrier)(int, GroupEnv*) = NULL;

int __tvm_ffi_add_one(void* self, const Any* args, int32_t n, Any* ret) {
  if (self != NULL) {
    const char* parts[] = {"add_one: self must be NULL"};
    TVMFFIErrorSetRaisedFromCStrParts("RuntimeError", parts, 1);
    return -1;
  }
  if (n != 1 || args[0].type_index != 1) {
    const char* parts[] = {"add_one: expected ", "one int argument"};
    TVMFFIErrorSetRaisedFromCStrParts("TypeError", parts, 2);
    return -1;
  }
  ret->type_index = 1; ret->small_len = 0; ret->v.i = args[0].v.i + 1;
  return 0;
}

static void* callback_handle = NULL;
static int init_callback(void** out) {
  return __TVMFFIEnvModLookupFromImports(__tvm_ffi__library_ctx, "kiln_test.callback", out);
}
int __tvm_ffi_call_callback(void* self, const Any* args, int32_t n, Any* ret) {
  if (__TVMFFIHandleInitOnce(&callback_handle, init_callback) != 0) return -1;
  return __TVMFFIFunctionCall(callback_handle, (Any*)args, n, ret);
}

int __tvm_ffi_workspace_sum(void* self, const Any* args, int32_t n, Any* ret) {
  int64_t len = args[0].v.i;
  double* buf = (double*)__TVMBackendAllocWorkspace(1, 0, (uint64_t)len * 8, 2, 64);
  if (buf == NULL) return -1;
  if (((uintptr_t)buf) % 64 != 0) {
    const char* parts[] = {"workspace is not 64-byte aligned"};
    TVMFFIErrorSetRaisedFromCStrParts("RuntimeError", parts, 1);
    return -1;
  }
  double s = 0;
  for (int64_t i = 0; i < len; ++i) buf[i] = (double)i;
  for (int64_t i = 0; i < len; ++i) s += buf[i];
  if (__TVMBackendFreeWorkspace(1, 0, buf) != 0) return -1;
  ret->type_index = 3; ret->small_len = 0; ret->v.f = s;
  return 0;
}

static int fill_task(int task_id, GroupEnv* env, void* cdata) {
  int64_t* out = (int64_t*)cdata;
  out[task_id] = task_id + 1;
  out[63] = env->num_task;
  return __TVMBackendParallelBarrier(task_id, env);
}
int __tvm_ffi_parallel_fill(void* self, const Any* args, int32_t n, Any* ret) {
  int rc = __TVMBackendParallelLaunch(fill_task, args[0].v.p, 0);
  ret->type_index = 1; ret->small_len = 0; ret->v.i = rc;
  return rc;
}

int __tvm_ffi_raise_value_error(void* self, const Any* args, int32_t n, Any* ret) {
  __TVMFFIErrorSetRaisedFromCStr("ValueError", "raised through the context slot");
  return -1;
}

const int __tvm_ffi_not_a_function = 7;
