/*
 * call_overhead.c -- cost of one call through TVMFFIFunctionCall, from C.
 *
 * Part of Kiln, licensed under the Apache License, Version 2.0.
 *
 * Looks up testing.nop and testing.echo in the global registry and times
 *   nop       testing.nop()      no arguments
 *   echo_int  testing.echo(1)    one int argument, int result
 * For each case: a warm-up, then RUNS timed runs of N calls; prints the
 * median nanoseconds per call as "c <case> <ns>".
 *
 * Usage: call_overhead [N [RUNS]]   (defaults: N = 1000000, RUNS = 7)
 * Uses only the TVM-FFI C ABI, so it links against libkiln_runtime.so or
 * against libtvm_ffi.so (+ libtvm_ffi_testing.so, which registers testing.*).
 */
#define _POSIX_C_SOURCE 200809L
#include <kiln/c_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static void* lookup(const char* name) {
  TVMFFIByteArray b = {name, strlen(name)};
  void* f = NULL;
  if (TVMFFIFunctionGetGlobal(&b, &f) != 0 || f == NULL) {
    fprintf(stderr, "call_overhead: global function %s not found\n", name);
    exit(1);
  }
  return f;
}

static void report_error_and_exit(const char* what) {
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err != NULL) {
    TVMFFIErrorCell* c = (TVMFFIErrorCell*)((char*)err + sizeof(TVMFFIObject));
    fprintf(stderr, "call_overhead: %s failed: %.*s: %.*s\n", what, (int)c->kind.size,
            c->kind.data, (int)c->message.size, c->message.data);
  } else {
    fprintf(stderr, "call_overhead: %s failed\n", what);
  }
  exit(1);
}

/* one timed run of n calls; returns ns per call */
static double run_once(void* f, TVMFFIAny* args, int32_t nargs, long n, const char* what) {
  TVMFFIAny res;
  double t0 = now_ns();
  for (long i = 0; i < n; ++i) {
    res.type_index = kTVMFFINone;
    res.zero_padding = 0;
    res.v_int64 = 0;
    if (TVMFFIFunctionCall(f, args, nargs, &res) != 0) report_error_and_exit(what);
    if (res.type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(res.v_obj);
  }
  double t1 = now_ns();
  return (t1 - t0) / (double)n;
}

static void bench(const char* label, void* f, TVMFFIAny* args, int32_t nargs, long n, int runs) {
  /* check the function does what we expect before timing it */
  TVMFFIAny res;
  memset(&res, 0, sizeof(res));
  if (TVMFFIFunctionCall(f, args, nargs, &res) != 0) report_error_and_exit(label);
  if (nargs == 1 && (res.type_index != args[0].type_index || res.v_int64 != args[0].v_int64)) {
    fprintf(stderr, "call_overhead: %s returned type %d value %lld\n", label, res.type_index,
            (long long)res.v_int64);
    exit(1);
  }
  if (res.type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(res.v_obj);

  run_once(f, args, nargs, n / 4 > 1000 ? n / 4 : 1000, label); /* warm-up */
  double* t = (double*)malloc(sizeof(double) * (size_t)runs);
  for (int r = 0; r < runs; ++r) t[r] = run_once(f, args, nargs, n, label);
  qsort(t, (size_t)runs, sizeof(double), cmp_double);
  double median = runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
  printf("c %s %.2f\n", label, median);
  fflush(stdout);
  free(t);
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000L;
  int runs = argc > 2 ? atoi(argv[2]) : 7;
  if (n < 1) n = 1;
  if (runs < 5) runs = 5;

  void* nop = lookup("testing.nop");
  void* echo = lookup("testing.echo");

  bench("nop", nop, NULL, 0, n, runs);

  TVMFFIAny one;
  memset(&one, 0, sizeof(one));
  one.type_index = kTVMFFIInt;
  one.v_int64 = 1;
  bench("echo_int", echo, &one, 1, n, runs);

  TVMFFIObjectDecRef(nop);
  TVMFFIObjectDecRef(echo);
  return 0;
}
