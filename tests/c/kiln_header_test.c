/*
 * kiln_header_test.c -- proves that Kiln's own C header, <kiln/c_api.h>, is
 * usable on its own: compiled against it (and nothing from TVM-FFI), this
 * program makes a few calls into the runtime library and checks the answers.
 *
 * Part of Kiln, licensed under the Apache License, Version 2.0.
 *
 * Prints a line starting with "FAIL" for each failed check and finishes with
 * "<passed> passed, <failed> failed"; exits non-zero on any failure.
 */
#include <kiln/c_api.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KILN_C_API
#error "this test must be compiled against include/kiln/c_api.h"
#endif

static int n_pass, n_fail;

static void check(int ok, int line, const char* what, const char* fmt, ...) {
  if (ok) {
    n_pass++;
    return;
  }
  n_fail++;
  printf("FAIL line %d: %s", line, what);
  if (fmt[0] != '\0') {
    va_list ap;
    va_start(ap, fmt);
    printf(" -- ");
    vprintf(fmt, ap);
    va_end(ap);
  }
  printf("\n");
}
#define CHECK(cond, ...) check(!!(cond), __LINE__, #cond, "" __VA_ARGS__)

static TVMFFIByteArray text(const char* s) {
  TVMFFIByteArray b = {s, strlen(s)};
  return b;
}

static int same(TVMFFIByteArray b, const char* s) {
  return b.size == strlen(s) && memcmp(b.data, s, b.size) == 0;
}

static int contains(TVMFFIByteArray b, const char* needle) {
  size_t n = strlen(needle);
  for (size_t i = 0; n <= b.size && i <= b.size - n; i++) {
    if (memcmp(b.data + i, needle, n) == 0) return 1;
  }
  return 0;
}

static uint32_t refs(void* obj) {
  return (uint32_t)(((TVMFFIObject*)obj)->combined_ref_count & 0xffffffffu);
}

static void drop(TVMFFIAny* v) {
  if (v->type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(v->v_obj);
  memset(v, 0, sizeof(*v));
}

static void* lookup(const char* name) {
  TVMFFIByteArray b = text(name);
  void* f = NULL;
  CHECK(TVMFFIFunctionGetGlobal(&b, &f) == 0 && f != NULL, "global %s missing", name);
  return f;
}

static int call(void* f, TVMFFIAny* args, int n, TVMFFIAny* out) {
  memset(out, 0, sizeof(*out));
  out->type_index = kTVMFFINone;
  return TVMFFIFunctionCall(f, args, n, out);
}

static int times_ten(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* out) {
  (void)self;
  if (n != 1 || args[0].type_index != kTVMFFIInt) {
    const char* parts[2] = {"times_ten: ", "expected one int"};
    TVMFFIErrorSetRaisedFromCStrParts("TypeError", parts, 2);
    return -1;
  }
  out->type_index = kTVMFFIInt;
  out->zero_padding = 0;
  out->v_int64 = args[0].v_int64 * 10;
  return 0;
}

static int g_deleted;
static void on_delete(void* self) {
  (void)self;
  g_deleted++;
}

int main(void) {
  TVMFFIVersion ver;
  TVMFFIGetVersion(&ver);
  CHECK(ver.major == TVM_FFI_VERSION_MAJOR && ver.minor == TVM_FFI_VERSION_MINOR,
        "library %u.%u.%u vs header %d.%d", ver.major, ver.minor, ver.patch,
        TVM_FFI_VERSION_MAJOR, TVM_FFI_VERSION_MINOR);

  TVMFFIByteArray key = text("ffi.String");
  int32_t idx = -1;
  CHECK(TVMFFITypeKeyToIndex(&key, &idx) == 0 && idx == kTVMFFIStr, "ffi.String -> %d", idx);

  void* echo = lookup("testing.echo");
  void* apply = lookup("testing.apply");
  void* raise = lookup("testing.test_raise_error");
  if (echo == NULL || apply == NULL || raise == NULL) {
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return 1;
  }

  /* echo an int */
  TVMFFIAny arg, res;
  memset(&arg, 0, sizeof(arg));
  arg.type_index = kTVMFFIInt;
  arg.v_int64 = 123456789012345LL;
  CHECK(call(echo, &arg, 1, &res) == 0);
  CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 123456789012345LL, "echo int gave %d/%lld",
        res.type_index, (long long)res.v_int64);

  /* echo a small and a large string */
  TVMFFIByteArray small_in = text("kiln");
  TVMFFIAny small;
  CHECK(TVMFFIStringFromByteArray(&small_in, &small) == 0);
  CHECK(small.type_index == kTVMFFISmallStr && small.small_str_len == 4, "small str %d/%u",
        small.type_index, small.small_str_len);
  CHECK(call(echo, &small, 1, &res) == 0);
  CHECK(res.type_index == kTVMFFISmallStr &&
            same(TVMFFISmallBytesGetContentByteArray(&res), "kiln"),
        "echo small str type %d", res.type_index);
  drop(&res);

  TVMFFIByteArray big_in = text("a string kept in a heap object");
  TVMFFIAny big;
  CHECK(TVMFFIStringFromByteArray(&big_in, &big) == 0);
  CHECK(big.type_index == kTVMFFIStr, "large str type %d", big.type_index);
  if (big.type_index == kTVMFFIStr) {
    CHECK(TVMFFIObjectGetTypeIndex(big.v_obj) == kTVMFFIStr);
    CHECK(same(*TVMFFIBytesGetByteArrayPtr(big.v_obj), "a string kept in a heap object"));
    CHECK(call(echo, &big, 1, &res) == 0);
    CHECK(res.type_index == kTVMFFIStr && res.v_obj == big.v_obj, "echo large str");
    CHECK(refs(big.v_obj) == 2, "refs %u", refs(big.v_obj));
    drop(&res);
    CHECK(refs(big.v_obj) == 1, "refs %u", refs(big.v_obj));
  }
  drop(&big);

  /* an error raised by the runtime */
  TVMFFIAny eargs[2];
  memset(eargs, 0, sizeof(eargs));
  eargs[0].type_index = kTVMFFIRawStr;
  eargs[0].v_c_str = "ValueError";
  eargs[1].type_index = kTVMFFIRawStr;
  eargs[1].v_c_str = "some message";
  CHECK(call(raise, eargs, 2, &res) == -1);
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  CHECK(err != NULL, "no error raised");
  if (err != NULL) {
    TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
    CHECK(TVMFFIObjectGetTypeIndex(err) == kTVMFFIError);
    CHECK(same(cell->kind, "ValueError"), "kind %.*s", (int)cell->kind.size, cell->kind.data);
    CHECK(same(cell->message, "some message"), "message %.*s", (int)cell->message.size,
          cell->message.data);
    TVMFFIObjectDecRef(err);
  }

  /* a C function through testing.apply, success and error */
  void* f = NULL;
  CHECK(TVMFFIFunctionCreate(&g_deleted, times_ten, on_delete, &f) == 0 && f != NULL);
  if (f != NULL) {
    CHECK(TVMFFIFunctionGetCellPtr(f)->safe_call != NULL);
    TVMFFIAny aargs[2];
    memset(aargs, 0, sizeof(aargs));
    aargs[0].type_index = kTVMFFIFunction;
    aargs[0].v_obj = (TVMFFIObject*)f;
    aargs[1].type_index = kTVMFFIInt;
    aargs[1].v_int64 = 7;
    CHECK(call(apply, aargs, 2, &res) == 0);
    CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 70, "apply gave %d/%lld", res.type_index,
          (long long)res.v_int64);
    aargs[1].type_index = kTVMFFIFloat;
    aargs[1].v_float64 = 0.5;
    CHECK(call(apply, aargs, 2, &res) == -1);
    err = NULL;
    TVMFFIErrorMoveFromRaised(&err);
    CHECK(err != NULL);
    if (err != NULL) {
      CHECK(same(TVMFFIErrorGetCellPtr(err)->kind, "TypeError"));
      CHECK(same(TVMFFIErrorGetCellPtr(err)->message, "times_ten: expected one int"));
      TVMFFIObjectDecRef(err);
    }
    TVMFFIObjectDecRef(f);
    CHECK(g_deleted == 1, "deleter ran %d times", g_deleted);
  }

  /* A library whose code needs CPU features this machine lacks (built by scripts/c_tests.sh,
   * which names it in KILN_REFUSED_LIB): loading it fails with -1 and a RuntimeError naming the
   * file and the missing features, and its constructor, which would create KILN_REFUSED_MARKER,
   * never runs. */
  const char* refused = getenv("KILN_REFUSED_LIB");
  const char* marker = getenv("KILN_REFUSED_MARKER");
  if (refused != NULL && marker != NULL) {
    void* load = lookup("ffi.ModuleLoadFromFile");
    TVMFFIAny path;
    memset(&path, 0, sizeof(path));
    path.type_index = kTVMFFIRawStr;
    path.v_c_str = refused;
    CHECK(load != NULL && call(load, &path, 1, &res) == -1, "the library loaded");
    err = NULL;
    TVMFFIErrorMoveFromRaised(&err);
    CHECK(err != NULL, "no error raised");
    if (err != NULL) {
      TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
      CHECK(same(cell->kind, "RuntimeError"), "kind %.*s", (int)cell->kind.size, cell->kind.data);
      CHECK(contains(cell->message, refused) && contains(cell->message, "sapphirerapids") &&
                contains(cell->message, "amx-tile") && contains(cell->message, "avx512fp16"),
            "message %.*s", (int)cell->message.size, cell->message.data);
      TVMFFIObjectDecRef(err);
    }
    FILE* ran = fopen(marker, "r");
    CHECK(ran == NULL, "the library's constructor ran");
    if (ran != NULL) fclose(ran);
    if (load != NULL) TVMFFIObjectDecRef(load);
  }

  TVMFFIObjectDecRef(echo);
  TVMFFIObjectDecRef(apply);
  TVMFFIObjectDecRef(raise);
  printf("%d passed, %d failed\n", n_pass, n_fail);
  return n_fail == 0 ? 0 : 1;
}
