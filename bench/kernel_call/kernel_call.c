/*
 * kernel_call.c -- cost of calling a small compiled kernel, and of loading its library, from C.
 *
 * Part of Kiln, licensed under the Apache License, Version 2.0.
 *
 * Loads LIB.so (Apache TVM's vadd: C = A + B over float32 vectors of symbolic length) through the
 * global ffi.ModuleLoadFromFile(path), takes "vadd" with ffi.ModuleGetFunction(mod, name, true)
 * and times, for each length n in {1, 1024}, RUNS runs of N calls of
 *   TVMFFIFunctionCall(vadd, {A, B, C}, 3, &result)
 * whose arguments are DLTensor* values (type index 7) over 64-byte-aligned buffers, after a
 * warm-up and a check of the result. Also times ffi.ModuleLoadFromFile itself: the first load in
 * the process, then the median over LOADS fresh copies of the file (each a real dlopen).
 *
 * Prints "c <case> <value>": load_first_us, load_us (microseconds), vadd_1, vadd_1024 (median
 * nanoseconds per call).
 *
 * Usage: kernel_call LIB.so [N [RUNS]]   (defaults: N = 1000000, RUNS = 9)
 * Uses only the TVM-FFI C ABI, so it links against libkiln_runtime.so or against Apache TVM's
 * runtime (libtvm_runtime.so + libtvm_ffi.so).
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/c_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { LOADS = 21 };

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* median of t[0..n), sorting t */
static double median(double* t, int n) {
  qsort(t, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static void report_error_and_exit(const char* what) {
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err != NULL) {
    TVMFFIErrorCell* c = (TVMFFIErrorCell*)((char*)err + sizeof(TVMFFIObject));
    fprintf(stderr, "kernel_call: %s failed: %.*s: %.*s\n", what, (int)c->kind.size,
            c->kind.data, (int)c->message.size, c->message.data);
  } else {
    fprintf(stderr, "kernel_call: %s failed\n", what);
  }
  exit(1);
}

static void* lookup(const char* name) {
  TVMFFIByteArray b = {name, strlen(name)};
  void* f = NULL;
  if (TVMFFIFunctionGetGlobal(&b, &f) != 0 || f == NULL) {
    fprintf(stderr, "kernel_call: global function %s not found\n", name);
    exit(1);
  }
  return f;
}

static TVMFFIAny raw_str(const char* s) {
  TVMFFIAny a;
  memset(&a, 0, sizeof(a));
  a.type_index = kTVMFFIRawStr;
  a.v_c_str = s;
  return a;
}

/* ffi.ModuleLoadFromFile(path) -> module handle (owned) */
static void* load_module(void* loader, const char* path) {
  TVMFFIAny arg = raw_str(path), res;
  memset(&res, 0, sizeof(res));
  if (TVMFFIFunctionCall(loader, &arg, 1, &res) != 0) report_error_and_exit(path);
  if (res.type_index != kTVMFFIModule) {
    fprintf(stderr, "kernel_call: loading %s gave type %d, not a module\n", path, res.type_index);
    exit(1);
  }
  return res.v_obj;
}

/* ffi.ModuleGetFunction(mod, name, true) -> function handle (owned) */
static void* get_function(void* mod, const char* name) {
  void* get = lookup("ffi.ModuleGetFunction");
  TVMFFIAny args[3], res;
  memset(args, 0, sizeof(args));
  memset(&res, 0, sizeof(res));
  args[0].type_index = kTVMFFIModule;
  args[0].v_obj = mod;
  args[1] = raw_str(name);
  args[2].type_index = kTVMFFIBool;
  args[2].v_int64 = 1;
  if (TVMFFIFunctionCall(get, args, 3, &res) != 0) report_error_and_exit("ffi.ModuleGetFunction");
  TVMFFIObjectDecRef(get);
  if (res.type_index != kTVMFFIFunction) {
    fprintf(stderr, "kernel_call: the module has no function %s\n", name);
    exit(1);
  }
  return res.v_obj;
}

/* copies src to dst; 0 on success */
static int copy_file(const char* src, const char* dst) {
  FILE* in = fopen(src, "rb");
  FILE* out = in ? fopen(dst, "wb") : NULL;
  char buf[1 << 16];
  size_t n;
  int ok = in && out;
  while (ok && (n = fread(buf, 1, sizeof(buf), in)) > 0) ok = fwrite(buf, 1, n, out) == n;
  if (in) fclose(in);
  if (out && fclose(out) != 0) ok = 0;
  return ok ? 0 : -1;
}

/* times ffi.ModuleLoadFromFile on LOADS fresh copies of path; prints the median */
static void bench_load(void* loader, const char* path) {
  char dir[] = "/tmp/kernel_call_XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("kernel_call: mkdtemp");
    exit(1);
  }
  char copies[LOADS][64];
  void* mods[LOADS];
  double t[LOADS];
  for (int i = 0; i < LOADS; ++i) {
    snprintf(copies[i], sizeof(copies[i]), "%s/copy%d.so", dir, i);
    if (copy_file(path, copies[i]) != 0) {
      fprintf(stderr, "kernel_call: cannot copy %s to %s\n", path, copies[i]);
      exit(1);
    }
  }
  for (int i = 0; i < LOADS; ++i) { /* modules stay loaded until all are timed */
    double t0 = now_ns();
    mods[i] = load_module(loader, copies[i]);
    t[i] = (now_ns() - t0) / 1e3;
  }
  for (int i = 0; i < LOADS; ++i) {
    TVMFFIObjectDecRef(mods[i]);
    unlink(copies[i]);
  }
  rmdir(dir);
  printf("c load_us %.2f\n", median(t, LOADS));
  fflush(stdout);
}

static DLTensor vector_f32(float* data, int64_t* shape) {
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = 1;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = NULL;
  t.byte_offset = 0;
  return t;
}

/* one timed run of calls; returns ns per call */
static double run_once(void* f, TVMFFIAny* args, long calls) {
  TVMFFIAny res;
  double t0 = now_ns();
  for (long i = 0; i < calls; ++i) {
    res.type_index = kTVMFFINone;
    res.zero_padding = 0;
    res.v_int64 = 0;
    if (TVMFFIFunctionCall(f, args, 3, &res) != 0) report_error_and_exit("vadd");
  }
  return (now_ns() - t0) / (double)calls;
}

/* checks vadd on n elements, then prints the median ns per call over runs of `calls` calls */
static void bench_vadd(void* f, int64_t n, long calls, int runs) {
  size_t bytes = ((size_t)n * sizeof(float) + 63) / 64 * 64;
  float* a = aligned_alloc(64, bytes);
  float* b = aligned_alloc(64, bytes);
  float* c = aligned_alloc(64, bytes);
  if (!a || !b || !c) {
    fprintf(stderr, "kernel_call: out of memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < n; ++i) {
    a[i] = (float)i * 0.5f;
    b[i] = 1.0f - (float)i;
    c[i] = -1.0f;
  }
  int64_t shape[1] = {n};
  DLTensor ta = vector_f32(a, shape), tb = vector_f32(b, shape), tc = vector_f32(c, shape);
  TVMFFIAny args[3];
  memset(args, 0, sizeof(args));
  DLTensor* ts[3] = {&ta, &tb, &tc};
  for (int i = 0; i < 3; ++i) {
    args[i].type_index = kTVMFFIDLTensorPtr;
    args[i].v_ptr = ts[i];
  }

  run_once(f, args, 1);
  for (int64_t i = 0; i < n; ++i) {
    if (c[i] != a[i] + b[i]) {
      fprintf(stderr, "kernel_call: vadd n=%lld wrong at %lld: %g != %g + %g\n", (long long)n,
              (long long)i, c[i], a[i], b[i]);
      exit(1);
    }
  }
  run_once(f, args, calls / 4 > 1000 ? calls / 4 : 1000); /* warm-up */
  double* t = malloc(sizeof(double) * (size_t)runs);
  for (int r = 0; r < runs; ++r) t[r] = run_once(f, args, calls);
  printf("c vadd_%lld %.2f\n", (long long)n, median(t, runs));
  fflush(stdout);
  free(t);
  free(a);
  free(b);
  free(c);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: kernel_call LIB.so [N [RUNS]]\n");
    return 2;
  }
  const char* path = argv[1];
  long calls = argc > 2 ? atol(argv[2]) : 1000000L;
  int runs = argc > 3 ? atoi(argv[3]) : 9;
  if (calls < 1) calls = 1;
  if (runs < 7) runs = 7;

  void* loader = lookup("ffi.ModuleLoadFromFile");
  double t0 = now_ns();
  void* mod = load_module(loader, path);
  printf("c load_first_us %.2f\n", (now_ns() - t0) / 1e3);
  bench_load(loader, path);

  void* vadd = get_function(mod, "vadd");
  bench_vadd(vadd, 1, calls, runs);
  bench_vadd(vadd, 1024, calls, runs);

  TVMFFIObjectDecRef(vadd);
  TVMFFIObjectDecRef(mod);
  TVMFFIObjectDecRef(loader);
  return 0;
}
