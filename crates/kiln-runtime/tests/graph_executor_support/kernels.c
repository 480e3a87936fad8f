/* Float32 kernels with the TVM-FFI calling convention (`__tvm_ffi_<name>`, DLTensor* or
 * ffi.Tensor arguments), for the graph executor tests in Rust and Python. Each checks its
 * arguments and raises a ValueError through TVMFFIErrorSetRaisedFromCStr (resolved from the
 * process: Kiln's runtime) when they do not fit.
 *
 *   dense(x[M,K], w[N,K], b[N], out[M,N])   out = x @ w^T + b
 *   relu(a, out)                            any shape, same element count
 *   add(a, b, out)                          same element count
 *   split2(a[M,2H], lo[M,H], hi[M,H])       columns [0,H) and [H,2H)
 *   relu1d(a[n], out[n])                    1-D only (for flatten_data)
 *   fail(...)                               always raises
 */
#include <stdint.h>
#include <stddef.h>

typedef struct {
  void* data;
  struct { int32_t device_type, device_id; } device;
  int32_t ndim;
  struct { uint8_t code, bits; uint16_t lanes; } dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct { int32_t type_index; uint32_t small_len; union { int64_t i; double f; void* p; } v; } Any;
extern void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message);

#define FAIL(msg) do { TVMFFIErrorSetRaisedFromCStr("ValueError", msg); return -1; } while (0)

static int tensors(const Any* args, int32_t n, int32_t want, DLTensor** out, const char* who) {
  if (n != want) FAIL(who);
  for (int32_t i = 0; i < n; ++i) {
    if (args[i].type_index == 7) out[i] = (DLTensor*)args[i].v.p;
    else if (args[i].type_index == 70) out[i] = (DLTensor*)((char*)args[i].v.p + 24);
    else FAIL(who);
    if (out[i]->dtype.code != 2 || out[i]->dtype.bits != 32 || out[i]->dtype.lanes != 1) FAIL(who);
  }
  return 0;
}
static int64_t numel(const DLTensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}
static float* f32(const DLTensor* t) { return (float*)((char*)t->data + t->byte_offset); }

int __tvm_ffi_dense(void* self, const Any* args, int32_t n, Any* ret) {
  DLTensor* t[4];
  if (tensors(args, n, 4, t, "dense(x, w, b, out): expected 4 float32 tensors") != 0) return -1;
  if (t[0]->ndim != 2 || t[1]->ndim != 2 || t[2]->ndim != 1 || t[3]->ndim != 2) FAIL("dense: bad ndim");
  int64_t M = t[0]->shape[0], K = t[0]->shape[1], N = t[1]->shape[0];
  if (t[1]->shape[1] != K || t[2]->shape[0] != N || t[3]->shape[0] != M || t[3]->shape[1] != N)
    FAIL("dense: shapes do not fit");
  float *x = f32(t[0]), *w = f32(t[1]), *b = f32(t[2]), *o = f32(t[3]);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float s = b[j];
      for (int64_t k = 0; k < K; ++k) s += x[i * K + k] * w[j * K + k];
      o[i * N + j] = s;
    }
  return 0;
}

int __tvm_ffi_relu(void* self, const Any* args, int32_t n, Any* ret) {
  DLTensor* t[2];
  if (tensors(args, n, 2, t, "relu(a, out): expected 2 float32 tensors") != 0) return -1;
  int64_t len = numel(t[0]);
  if (numel(t[1]) != len) FAIL("relu: sizes differ");
  float *a = f32(t[0]), *o = f32(t[1]);
  for (int64_t i = 0; i < len; ++i) o[i] = a[i] > 0 ? a[i] : 0;
  return 0;
}

int __tvm_ffi_relu1d(void* self, const Any* args, int32_t n, Any* ret) {
  DLTensor* t[2];
  if (tensors(args, n, 2, t, "relu1d(a, out): expected 2 float32 tensors") != 0) return -1;
  if (t[0]->ndim != 1 || t[1]->ndim != 1) FAIL("relu1d: expected 1-D tensors (flatten_data)");
  return __tvm_ffi_relu(self, args, n, ret);
}

int __tvm_ffi_add(void* self, const Any* args, int32_t n, Any* ret) {
  DLTensor* t[3];
  if (tensors(args, n, 3, t, "add(a, b, out): expected 3 float32 tensors") != 0) return -1;
  int64_t len = numel(t[0]);
  if (numel(t[1]) != len || numel(t[2]) != len) FAIL("add: sizes differ");
  float *a = f32(t[0]), *b = f32(t[1]), *o = f32(t[2]);
  for (int64_t i = 0; i < len; ++i) o[i] = a[i] + b[i];
  return 0;
}

int __tvm_ffi_split2(void* self, const Any* args, int32_t n, Any* ret) {
  DLTensor* t[3];
  if (tensors(args, n, 3, t, "split2(a, lo, hi): expected 3 float32 tensors") != 0) return -1;
  if (t[0]->ndim != 2 || t[1]->ndim != 2 || t[2]->ndim != 2) FAIL("split2: bad ndim");
  int64_t M = t[0]->shape[0], W = t[0]->shape[1], H = W / 2;
  if (W % 2 || t[1]->shape[0] != M || t[1]->shape[1] != H || t[2]->shape[0] != M || t[2]->shape[1] != H)
    FAIL("split2: shapes do not fit");
  float *a = f32(t[0]), *lo = f32(t[1]), *hi = f32(t[2]);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < H; ++j) {
      lo[i * H + j] = a[i * W + j];
      hi[i * H + j] = a[i * W + H + j];
    }
  return 0;
}

int __tvm_ffi_fail(void* self, const Any* args, int32_t n, Any* ret) {
  FAIL("fail: this kernel always fails");
}
