/*
 * ffi_abi_test.c -- black-box test of the TVM-FFI C ABI as seen from C.
 *
 * Part of Kiln, licensed under the Apache License, Version 2.0.
 *
 * Compiled against the unmodified <tvm/ffi/c_api.h> from the apache-tvm-ffi
 * wheel and linked with a runtime library: Kiln's libkiln_runtime.so, or
 * TVM-FFI's own libtvm_ffi.so + libtvm_ffi_testing.so (which proves the
 * expectations below are the real ABI).  The runtime must provide the global
 * functions testing.{nop,echo,add_one,apply,test_raise_error} and
 * ffi.{Array,ArraySize,ArrayGetItem}.
 *
 * Every check that fails prints one line starting with "FAIL"; set
 * KILN_TEST_VERBOSE=1 to also see the passing ones.  The last line is always
 * "<passed> passed, <failed> failed" and the exit status is non-zero when
 * anything failed.  All references taken are released so the program can run
 * under valgrind.
 */
#define _GNU_SOURCE
#include <tvm/ffi/c_api.h>

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* check bookkeeping                                                          */
/* ------------------------------------------------------------------------ */

static int g_pass;
static int g_fail;
static int g_verbose;
static const char* volatile g_section = "startup";
static volatile int g_line;

static void check_impl(int ok, const char* expr, int line, const char* fmt, ...) {
  g_line = line;
  if (ok) {
    g_pass++;
    if (g_verbose) printf("ok   [%s] %s\n", g_section, expr);
    return;
  }
  g_fail++;
  printf("FAIL [%s] line %d: %s", g_section, line, expr);
  if (fmt != NULL && fmt[0] != '\0') {
    va_list ap;
    va_start(ap, fmt);
    printf(" -- ");
    vprintf(fmt, ap);
    va_end(ap);
  }
  printf("\n");
  fflush(stdout);
}

/* CHECK(cond) or CHECK(cond, "fmt", args...) -- the format explains what was seen. */
#define CHECK(cond, ...) check_impl(!!(cond), #cond, __LINE__, "" __VA_ARGS__)

static void on_crash(int sig) {
  char buf[256];
  int n = snprintf(buf, sizeof(buf),
                   "CRASH: signal %d in section [%s] after the check on line %d "
                   "(%d passed, %d failed so far)\n",
                   sig, g_section, g_line, g_pass, g_fail);
  if (n > 0) {
    ssize_t w = write(1, buf, (size_t)n);
    (void)w;
  }
  _exit(2);
}

/* ------------------------------------------------------------------------ */
/* small helpers                                                              */
/* ------------------------------------------------------------------------ */

static TVMFFIByteArray ba_of(const char* s) {
  TVMFFIByteArray b;
  b.data = s;
  b.size = strlen(s);
  return b;
}

static TVMFFIByteArray ba_n(const char* s, size_t n) {
  TVMFFIByteArray b;
  b.data = s;
  b.size = n;
  return b;
}

static int ba_eq(TVMFFIByteArray b, const char* s, size_t n) {
  return b.size == n && (n == 0 || (b.data != NULL && memcmp(b.data, s, n) == 0));
}

static int ba_eq_str(TVMFFIByteArray b, const char* s) { return ba_eq(b, s, strlen(s)); }

/* printable copy of a byte array for messages (truncated, rotating buffers) */
static const char* show_ba(TVMFFIByteArray b) {
  static char bufs[4][160];
  static int next;
  char* out = bufs[next];
  next = (next + 1) % 4;
  if (b.data == NULL) {
    snprintf(out, 160, "<NULL data, size %zu>", b.size);
    return out;
  }
  size_t j = 0;
  out[j++] = '"';
  for (size_t i = 0; i < b.size && j < 150; ++i) {
    unsigned char c = (unsigned char)b.data[i];
    if (c >= 32 && c < 127 && c != '"' && c != '\\') {
      out[j++] = (char)c;
    } else {
      j += (size_t)snprintf(out + j, 160 - j, "\\x%02x", c);
    }
  }
  if (j < 158) out[j++] = '"';
  out[j] = '\0';
  return out;
}

static uint32_t strong_count(const void* obj) {
  return (uint32_t)(((const TVMFFIObject*)obj)->combined_ref_count & 0xffffffffu);
}

static int32_t obj_type(const void* obj) { return ((const TVMFFIObject*)obj)->type_index; }

static void* obj_cell(void* obj) { return (char*)obj + sizeof(TVMFFIObject); }

static TVMFFIErrorCell* err_cell(void* err) { return (TVMFFIErrorCell*)obj_cell(err); }

static TVMFFIAny mk_none(void) {
  TVMFFIAny a;
  memset(&a, 0, sizeof(a));
  a.type_index = kTVMFFINone;
  return a;
}

static TVMFFIAny mk_int(int64_t v) {
  TVMFFIAny a = mk_none();
  a.type_index = kTVMFFIInt;
  a.v_int64 = v;
  return a;
}

static TVMFFIAny mk_bool(int v) {
  TVMFFIAny a = mk_none();
  a.type_index = kTVMFFIBool;
  a.v_int64 = v ? 1 : 0;
  return a;
}

static TVMFFIAny mk_float(double v) {
  TVMFFIAny a = mk_none();
  a.type_index = kTVMFFIFloat;
  a.v_float64 = v;
  return a;
}

static TVMFFIAny mk_ptr(void* p) {
  TVMFFIAny a = mk_none();
  a.type_index = kTVMFFIOpaquePtr;
  a.v_ptr = p;
  return a;
}

static TVMFFIAny mk_dtype(uint8_t code, uint8_t bits, uint16_t lanes) {
  TVMFFIAny a = mk_none();
  a.type_index = kTVMFFIDataType;
  a.v_dtype.code = code;
  a.v_dtype.bits = bits;
  a.v_dtype.lanes = lanes;
  return a;
}

static TVMFFIAny mk_device(int32_t type, int32_t id) {
  TVMFFIAny a = mk_none();
  a.type_index = kTVMFFIDevice;
  a.v_device.device_type = (DLDeviceType)type;
  a.v_device.device_id = id;
  return a;
}

static TVMFFIAny mk_rawstr(const char* s) {
  TVMFFIAny a = mk_none();
  a.type_index = kTVMFFIRawStr;
  a.v_c_str = s;
  return a;
}

static TVMFFIAny mk_obj(void* obj) {
  TVMFFIAny a = mk_none();
  a.type_index = obj_type(obj);
  a.v_obj = (TVMFFIObject*)obj;
  return a;
}

static void any_release(TVMFFIAny* a) {
  if (a->type_index >= kTVMFFIStaticObjectBegin && a->v_obj != NULL) {
    TVMFFIObjectDecRef(a->v_obj);
  }
  *a = mk_none();
}

static const char* show_any(const TVMFFIAny* a) {
  static char bufs[4][96];
  static int next;
  char* out = bufs[next];
  next = (next + 1) % 4;
  snprintf(out, 96, "{type_index=%d, word1=%u, payload=0x%016llx}", a->type_index,
           a->zero_padding, (unsigned long long)a->v_uint64);
  return out;
}

/* A string value's content, whether inline (11) or an object (65). */
static int string_view(const TVMFFIAny* a, TVMFFIByteArray* out) {
  if (a->type_index == kTVMFFISmallStr) {
    *out = ba_n(a->v_bytes, a->small_str_len);
    return 1;
  }
  if (a->type_index == kTVMFFIStr && a->v_obj != NULL) {
    *out = *(TVMFFIByteArray*)obj_cell(a->v_obj);
    return 1;
  }
  return 0;
}

/* A bytes value's content, whether inline (12) or an object (66). */
static int bytes_view(const TVMFFIAny* a, TVMFFIByteArray* out) {
  if (a->type_index == kTVMFFISmallBytes) {
    *out = ba_n(a->v_bytes, a->small_str_len);
    return 1;
  }
  if (a->type_index == kTVMFFIBytes && a->v_obj != NULL) {
    *out = *(TVMFFIByteArray*)obj_cell(a->v_obj);
    return 1;
  }
  return 0;
}

static int any_is_string(const TVMFFIAny* a, const char* s, size_t n) {
  TVMFFIByteArray b;
  return string_view(a, &b) && ba_eq(b, s, n);
}

static const char* show_string_any(const TVMFFIAny* a) {
  TVMFFIByteArray b;
  if (string_view(a, &b) || bytes_view(a, &b)) return show_ba(b);
  return show_any(a);
}

static void* take_error(void) {
  void* err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  return err;
}

static const char* show_error(void* err) {
  static char buf[512];
  if (err == NULL) return "<no error raised>";
  if (obj_type(err) != kTVMFFIError) {
    snprintf(buf, sizeof(buf), "<raised object has type_index %d, not 67>", obj_type(err));
    return buf;
  }
  TVMFFIErrorCell* c = err_cell(err);
  snprintf(buf, sizeof(buf), "%s: %s", show_ba(c->kind), show_ba(c->message));
  return buf;
}

/* Runs a call that is expected to succeed; on failure records the error. */
static int call_ok_impl(const char* what, int line, void* f, TVMFFIAny* args, int n,
                        TVMFFIAny* res) {
  *res = mk_none();
  g_line = line;
  if (f == NULL) {
    check_impl(0, what, line, "function handle is NULL");
    return 0;
  }
  int rc = TVMFFIFunctionCall(f, args, n, res);
  if (rc != 0) {
    void* err = take_error();
    check_impl(0, what, line, "call returned %d, error %s", rc, show_error(err));
    if (err) TVMFFIObjectDecRef(err);
    *res = mk_none();
    return 0;
  }
  check_impl(1, what, line, "");
  return 1;
}
#define CALL_OK(f, args, n, res) call_ok_impl(#f "(" #args ") succeeds", __LINE__, f, args, n, res)

/* Runs a call that is expected to fail; returns the raised error (owned). */
static void* call_fails_impl(const char* what, int line, void* f, TVMFFIAny* args, int n) {
  TVMFFIAny res = mk_none();
  g_line = line;
  if (f == NULL) {
    check_impl(0, what, line, "function handle is NULL");
    return NULL;
  }
  int rc = TVMFFIFunctionCall(f, args, n, &res);
  check_impl(rc == -1, what, line, "expected return code -1, got %d (result %s)", rc,
             show_any(&res));
  check_impl(res.type_index == kTVMFFINone, "result left as None after a failed call", line,
             "result is %s", show_any(&res));
  if (rc == 0) any_release(&res);
  void* err = take_error();
  check_impl(err != NULL, "an error object was raised", line, "");
  if (err != NULL) {
    check_impl(obj_type(err) == kTVMFFIError, "raised object is an ffi.Error (67)", line,
               "type_index %d", obj_type(err));
  }
  return err;
}
#define CALL_FAILS(f, args, n) call_fails_impl(#f "(" #args ") fails with -1", __LINE__, f, args, n)

static void* get_global(const char* name) {
  TVMFFIByteArray b = ba_of(name);
  void* f = NULL;
  int rc = TVMFFIFunctionGetGlobal(&b, &f);
  if (rc != 0) {
    void* err = take_error();
    printf("FAIL [%s] TVMFFIFunctionGetGlobal(\"%s\") returned %d: %s\n", g_section, name, rc,
           show_error(err));
    g_fail++;
    if (err) TVMFFIObjectDecRef(err);
    return NULL;
  }
  CHECK(f != NULL, "global function %s not found", name);
  if (f != NULL) {
    CHECK(obj_type(f) == kTVMFFIFunction, "%s has type_index %d", name, obj_type(f));
  }
  return f;
}

/* the global functions used throughout */
static void* g_echo;
static void* g_nop;
static void* g_add_one;
static void* g_apply;
static void* g_raise;
static void* g_array;
static void* g_array_size;
static void* g_array_get;

/* ------------------------------------------------------------------------ */
/* sections                                                                   */
/* ------------------------------------------------------------------------ */

static void test_version(void) {
  g_section = "version";
  TVMFFIVersion v;
  memset(&v, 0xff, sizeof(v));
  TVMFFIGetVersion(&v);
  CHECK(v.major == TVM_FFI_VERSION_MAJOR && v.minor == TVM_FFI_VERSION_MINOR,
        "library reports %u.%u.%u, header is %d.%d.%d", v.major, v.minor, v.patch,
        TVM_FFI_VERSION_MAJOR, TVM_FFI_VERSION_MINOR, TVM_FFI_VERSION_PATCH);
  CHECK(v.patch < 1000, "implausible patch number %u", v.patch);
  if (g_verbose) printf("     library version %u.%u.%u\n", v.major, v.minor, v.patch);
}

static void check_type_key(const char* key, int32_t expect) {
  TVMFFIByteArray b = ba_of(key);
  int32_t idx = -12345;
  int rc = TVMFFITypeKeyToIndex(&b, &idx);
  if (rc != 0) {
    void* err = take_error();
    CHECK(rc == 0, "TVMFFITypeKeyToIndex(\"%s\") returned %d: %s", key, rc, show_error(err));
    if (err) TVMFFIObjectDecRef(err);
    return;
  }
  CHECK(idx == expect, "TVMFFITypeKeyToIndex(\"%s\") gave %d, expected %d", key, idx, expect);
}

static void test_type_keys(void) {
  g_section = "type keys";
  check_type_key("ffi.Object", 64);
  check_type_key("ffi.String", 65);
  check_type_key("ffi.Bytes", 66);
  check_type_key("ffi.Error", 67);
  check_type_key("ffi.Function", 68);
  check_type_key("ffi.Shape", 69);
  check_type_key("ffi.Tensor", 70);
  check_type_key("ffi.Array", 71);
  check_type_key("ffi.Map", 72);
  check_type_key("ffi.Module", 73);
  check_type_key("ffi.List", 75);
  check_type_key("ffi.Dict", 76);
  check_type_key("None", 0);
  check_type_key("int", 1);
  check_type_key("bool", 2);
  check_type_key("float", 3);
  check_type_key("void*", 4);
  check_type_key("DataType", 5);
  check_type_key("Device", 6);
  check_type_key("DLTensor*", 7);
  check_type_key("const char*", 8);
  check_type_key("TVMFFIByteArray*", 9);
  check_type_key("ffi.SmallStr", 11);
  check_type_key("ffi.SmallBytes", 12);

  /* an unknown key is an error, reported the usual way */
  TVMFFIByteArray b = ba_of("kiln_ctest.NoSuchType");
  int32_t idx = -12345;
  int rc = TVMFFITypeKeyToIndex(&b, &idx);
  CHECK(rc != 0, "unknown type key returned 0 with index %d", idx);
  if (rc != 0) {
    void* err = take_error();
    CHECK(err != NULL, "unknown type key: rc %d but no error raised", rc);
    if (err) TVMFFIObjectDecRef(err);
  }
}

static void check_type_info(int32_t index, const char* key, int32_t depth) {
  const TVMFFITypeInfo* info = TVMFFIGetTypeInfo(index);
  CHECK(info != NULL, "TVMFFIGetTypeInfo(%d) returned NULL", index);
  if (info == NULL) return;
  CHECK(info->type_index == index, "TVMFFIGetTypeInfo(%d)->type_index is %d", index,
        info->type_index);
  CHECK(ba_eq_str(info->type_key, key), "TVMFFIGetTypeInfo(%d)->type_key is %s, expected %s",
        index, show_ba(info->type_key), key);
  CHECK(info->type_depth == depth, "TVMFFIGetTypeInfo(%d)->type_depth is %d, expected %d", index,
        info->type_depth, depth);
  if (depth > 0) {
    CHECK(info->type_ancestors != NULL && info->type_ancestors[0] != NULL &&
              info->type_ancestors[0]->type_index == kTVMFFIObject,
          "type %s: type_ancestors[0] is not ffi.Object", key);
  }
}

static void test_type_info(void) {
  g_section = "type info";
  check_type_info(kTVMFFIObject, "ffi.Object", 0);
  check_type_info(kTVMFFIStr, "ffi.String", 1);
  check_type_info(kTVMFFIBytes, "ffi.Bytes", 1);
  check_type_info(kTVMFFIError, "ffi.Error", 1);
  check_type_info(kTVMFFIFunction, "ffi.Function", 1);
  check_type_info(kTVMFFIArray, "ffi.Array", 1);
}

static void test_globals(void) {
  g_section = "global lookup";
  g_echo = get_global("testing.echo");
  g_nop = get_global("testing.nop");
  g_add_one = get_global("testing.add_one");
  g_apply = get_global("testing.apply");
  g_raise = get_global("testing.test_raise_error");
  g_array = get_global("ffi.Array");
  g_array_size = get_global("ffi.ArraySize");
  g_array_get = get_global("ffi.ArrayGetItem");

  /* the registry keeps one reference, GetGlobal hands out another */
  if (g_echo) CHECK(strong_count(g_echo) >= 2, "echo strong count %u", strong_count(g_echo));

  /* looking up twice gives the same object, one more reference */
  if (g_echo) {
    uint32_t before = strong_count(g_echo);
    void* again = get_global("testing.echo");
    CHECK(again == g_echo, "second lookup returned %p, first %p", again, g_echo);
    if (again) {
      CHECK(strong_count(g_echo) == before + 1, "count %u -> %u", before, strong_count(g_echo));
      TVMFFIObjectDecRef(again);
      CHECK(strong_count(g_echo) == before, "count after release %u", strong_count(g_echo));
    }
  }

  /* a missing name is not an error: success with NULL */
  TVMFFIByteArray missing = ba_of("kiln_ctest.no_such_function");
  void* f = (void*)0x1;
  int rc = TVMFFIFunctionGetGlobal(&missing, &f);
  CHECK(rc == 0, "GetGlobal of a missing name returned %d", rc);
  CHECK(f == NULL, "GetGlobal of a missing name gave %p", f);
  if (rc != 0) {
    void* err = take_error();
    if (err) TVMFFIObjectDecRef(err);
  }

  TVMFFIAny res;
  if (CALL_OK(g_nop, NULL, 0, &res)) {
    CHECK(res.type_index == kTVMFFINone, "nop returned %s", show_any(&res));
    any_release(&res);
  }
  TVMFFIAny arg = mk_int(41);
  if (CALL_OK(g_add_one, &arg, 1, &res)) {
    CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 42, "add_one(41) gave %s",
          show_any(&res));
    any_release(&res);
  }
}

/* echo of a plain value: same type index, zero second word, same 8 bytes */
static void echo_plain(const char* label, TVMFFIAny in) {
  TVMFFIAny res;
  if (!call_ok_impl(label, __LINE__, g_echo, &in, 1, &res)) return;
  CHECK(res.type_index == in.type_index, "%s: echo returned %s for %s", label, show_any(&res),
        show_any(&in));
  CHECK(res.zero_padding == 0, "%s: second word is %u", label, res.zero_padding);
  CHECK(res.v_uint64 == in.v_uint64, "%s: payload 0x%016llx, sent 0x%016llx", label,
        (unsigned long long)res.v_uint64, (unsigned long long)in.v_uint64);
  any_release(&res);
}

static void test_echo_plain(void) {
  g_section = "echo plain values";
  echo_plain("None", mk_none());
  echo_plain("int 0", mk_int(0));
  echo_plain("int 42", mk_int(42));
  echo_plain("int -1", mk_int(-1));
  echo_plain("int max", mk_int(INT64_MAX));
  echo_plain("int min", mk_int(INT64_MIN));
  echo_plain("bool true", mk_bool(1));
  echo_plain("bool false", mk_bool(0));
  echo_plain("float 3.25", mk_float(3.25));
  echo_plain("float -0.0", mk_float(-0.0));
  echo_plain("float inf", mk_float(INFINITY));
  echo_plain("float 1e-300", mk_float(1e-300));
  echo_plain("opaque ptr", mk_ptr((void*)&g_pass));
  echo_plain("dtype float32x4", mk_dtype(kDLFloat, 32, 4));
  echo_plain("dtype int8", mk_dtype(kDLInt, 8, 1));
  echo_plain("device cuda:3", mk_device(kDLCUDA, 3));
  echo_plain("device cpu:0", mk_device(kDLCPU, 0));

  /* NaN: compare bit patterns */
  TVMFFIAny nan = mk_float(NAN);
  TVMFFIAny res;
  if (CALL_OK(g_echo, &nan, 1, &res)) {
    CHECK(res.type_index == kTVMFFIFloat && isnan(res.v_float64), "echo NaN gave %s",
          show_any(&res));
    any_release(&res);
  }
}

static void check_dtype_parse(const char* text, uint8_t code, uint8_t bits, uint16_t lanes) {
  TVMFFIByteArray b = ba_of(text);
  DLDataType dt;
  memset(&dt, 0xee, sizeof(dt));
  int rc = TVMFFIDataTypeFromString(&b, &dt);
  if (rc != 0) {
    void* err = take_error();
    CHECK(rc == 0, "TVMFFIDataTypeFromString(\"%s\") returned %d: %s", text, rc, show_error(err));
    if (err) TVMFFIObjectDecRef(err);
    return;
  }
  CHECK(dt.code == code && dt.bits == bits && dt.lanes == lanes,
        "\"%s\" parsed as {code %u, bits %u, lanes %u}, expected {%u, %u, %u}", text, dt.code,
        dt.bits, dt.lanes, code, bits, lanes);
}

static void check_dtype_print(uint8_t code, uint8_t bits, uint16_t lanes, const char* text) {
  DLDataType dt;
  dt.code = code;
  dt.bits = bits;
  dt.lanes = lanes;
  TVMFFIAny out = mk_none();
  int rc = TVMFFIDataTypeToString(&dt, &out);
  if (rc != 0) {
    void* err = take_error();
    CHECK(rc == 0, "TVMFFIDataTypeToString({%u,%u,%u}) returned %d: %s", code, bits, lanes, rc,
          show_error(err));
    if (err) TVMFFIObjectDecRef(err);
    return;
  }
  size_t n = strlen(text);
  /* always a Str object, however short (callers read it through the object cell) */
  CHECK(out.type_index == kTVMFFIStr, "ToString({%u,%u,%u}) has type_index %d, expected 65",
        code, bits, lanes, out.type_index);
  CHECK(any_is_string(&out, text, n), "ToString({%u,%u,%u}) gave %s, expected \"%s\"", code, bits,
        lanes, show_string_any(&out), text);
  if (out.type_index == kTVMFFIStr) {
    CHECK(strong_count(out.v_obj) == 1, "string from ToString has strong count %u",
          strong_count(out.v_obj));
  }
  any_release(&out);
}

static void test_dtype(void) {
  g_section = "data types";
  check_dtype_parse("float32x4", kDLFloat, 32, 4);
  check_dtype_parse("float32", kDLFloat, 32, 1);
  check_dtype_parse("int8", kDLInt, 8, 1);
  check_dtype_parse("uint32", kDLUInt, 32, 1);
  check_dtype_parse("float16", kDLFloat, 16, 1);
  check_dtype_parse("bfloat16", kDLBfloat, 16, 1);
  check_dtype_parse("int64", kDLInt, 64, 1);
  check_dtype_parse("bool", kDLBool, 8, 1);
  check_dtype_print(kDLFloat, 32, 4, "float32x4");
  check_dtype_print(kDLFloat, 32, 1, "float32");
  check_dtype_print(kDLInt, 8, 1, "int8");
  check_dtype_print(kDLUInt, 32, 1, "uint32");
  check_dtype_print(kDLBfloat, 16, 1, "bfloat16");
  check_dtype_print(kDLBool, 8, 1, "bool");

  /* round trip text -> dtype -> echo -> text */
  TVMFFIByteArray b = ba_of("float32x4");
  DLDataType dt;
  memset(&dt, 0, sizeof(dt));
  if (TVMFFIDataTypeFromString(&b, &dt) == 0) {
    TVMFFIAny in = mk_none();
    in.type_index = kTVMFFIDataType;
    in.v_dtype = dt;
    TVMFFIAny res;
    if (CALL_OK(g_echo, &in, 1, &res)) {
      CHECK(res.type_index == kTVMFFIDataType && res.v_dtype.code == kDLFloat &&
                res.v_dtype.bits == 32 && res.v_dtype.lanes == 4,
            "echo of float32x4 gave %s", show_any(&res));
      TVMFFIAny text = mk_none();
      if (TVMFFIDataTypeToString(&res.v_dtype, &text) == 0) {
        CHECK(any_is_string(&text, "float32x4", 9), "round trip text %s",
              show_string_any(&text));
        any_release(&text);
      } else {
        void* err = take_error();
        CHECK(0, "DataTypeToString of echoed dtype failed: %s", show_error(err));
        if (err) TVMFFIObjectDecRef(err);
      }
      any_release(&res);
    }
  } else {
    void* err = take_error();
    if (err) TVMFFIObjectDecRef(err);
  }

  /* a malformed name is an error */
  TVMFFIByteArray bad = ba_of("not_a_dtype");
  memset(&dt, 0, sizeof(dt));
  int rc = TVMFFIDataTypeFromString(&bad, &dt);
  CHECK(rc != 0, "\"not_a_dtype\" parsed as {%u,%u,%u}", dt.code, dt.bits, dt.lanes);
  if (rc != 0) {
    void* err = take_error();
    CHECK(err != NULL, "bad dtype: rc %d but no error raised", rc);
    if (err) TVMFFIObjectDecRef(err);
  }
}

/* Builds a string with TVMFFIStringFromByteArray and echoes it. */
static void string_case(const char* label, const char* s, size_t n) {
  TVMFFIByteArray in = ba_n(s, n);
  TVMFFIAny v = mk_none();
  int rc = TVMFFIStringFromByteArray(&in, &v);
  if (rc != 0) {
    void* err = take_error();
    CHECK(rc == 0, "%s: TVMFFIStringFromByteArray returned %d: %s", label, rc, show_error(err));
    if (err) TVMFFIObjectDecRef(err);
    return;
  }
  int small = n <= 7;
  if (small) {
    CHECK(v.type_index == kTVMFFISmallStr, "%s (%zu bytes): type_index %d, expected 11", label, n,
          v.type_index);
    CHECK(v.small_str_len == n, "%s: small_str_len %u, expected %zu", label, v.small_str_len, n);
    CHECK(n == 0 || memcmp(v.v_bytes, s, n) == 0, "%s: inline bytes %s", label,
          show_ba(ba_n(v.v_bytes, n)));
    CHECK(v.v_bytes[n] == '\0', "%s: inline text not NUL-terminated", label);
  } else {
    CHECK(v.type_index == kTVMFFIStr, "%s (%zu bytes): type_index %d, expected 65", label, n,
          v.type_index);
    if (v.type_index != kTVMFFIStr) {
      any_release(&v);
      return;
    }
    CHECK(v.zero_padding == 0, "%s: second word %u", label, v.zero_padding);
    CHECK(obj_type(v.v_obj) == kTVMFFIStr, "%s: object header type_index %d", label,
          obj_type(v.v_obj));
    CHECK(strong_count(v.v_obj) == 1, "%s: new string has strong count %u", label,
          strong_count(v.v_obj));
    TVMFFIByteArray* cell = (TVMFFIByteArray*)obj_cell(v.v_obj);
    CHECK(ba_eq(*cell, s, n), "%s: cell holds %s", label, show_ba(*cell));
    CHECK(cell->data != s, "%s: string object did not copy the input", label);
    CHECK(cell->data != NULL && cell->data[n] == '\0', "%s: object data not NUL-terminated",
          label);
  }

  TVMFFIAny res;
  if (call_ok_impl(label, __LINE__, g_echo, &v, 1, &res)) {
    CHECK(res.type_index == v.type_index, "%s: echo type_index %d, sent %d", label,
          res.type_index, v.type_index);
    CHECK(any_is_string(&res, s, n), "%s: echo content %s", label, show_string_any(&res));
    if (!small && res.type_index == kTVMFFIStr) {
      CHECK(res.v_obj == v.v_obj, "%s: echo returned object %p, sent %p", label,
            (void*)res.v_obj, (void*)v.v_obj);
      CHECK(strong_count(v.v_obj) == 2, "%s: strong count after echo %u, expected 2", label,
            strong_count(v.v_obj));
    }
    any_release(&res);
    if (!small) {
      CHECK(strong_count(v.v_obj) == 1, "%s: strong count after releasing echo result %u", label,
            strong_count(v.v_obj));
    }
  }
  any_release(&v);
}

static void test_strings(void) {
  g_section = "strings";
  string_case("empty string", "", 0);
  string_case("small string", "hello", 5);
  string_case("7-byte string", "1234567", 7);
  string_case("small string with NUL", "ab\0cd", 5);
  string_case("8-byte string", "12345678", 8);
  string_case("large string", "a string that does not fit inline", 33);
  string_case("large string with NUL", "abc\0defghijklmnop", 17);

  char big[5000];
  for (size_t i = 0; i < sizeof(big); ++i) big[i] = (char)('a' + i % 26);
  string_case("5000-byte string", big, sizeof(big));
}

static void bytes_case(const char* label, const char* s, size_t n) {
  TVMFFIByteArray in = ba_n(s, n);
  TVMFFIAny v = mk_none();
  int rc = TVMFFIBytesFromByteArray(&in, &v);
  if (rc != 0) {
    void* err = take_error();
    CHECK(rc == 0, "%s: TVMFFIBytesFromByteArray returned %d: %s", label, rc, show_error(err));
    if (err) TVMFFIObjectDecRef(err);
    return;
  }
  int small = n <= 7;
  if (small) {
    CHECK(v.type_index == kTVMFFISmallBytes, "%s (%zu bytes): type_index %d, expected 12", label,
          n, v.type_index);
    CHECK(v.small_str_len == n, "%s: small_str_len %u, expected %zu", label, v.small_str_len, n);
    CHECK(n == 0 || memcmp(v.v_bytes, s, n) == 0, "%s: inline bytes %s", label,
          show_ba(ba_n(v.v_bytes, n)));
  } else {
    CHECK(v.type_index == kTVMFFIBytes, "%s (%zu bytes): type_index %d, expected 66", label, n,
          v.type_index);
    if (v.type_index != kTVMFFIBytes) {
      any_release(&v);
      return;
    }
    CHECK(obj_type(v.v_obj) == kTVMFFIBytes, "%s: object header type_index %d", label,
          obj_type(v.v_obj));
    CHECK(strong_count(v.v_obj) == 1, "%s: new bytes has strong count %u", label,
          strong_count(v.v_obj));
    TVMFFIByteArray* cell = (TVMFFIByteArray*)obj_cell(v.v_obj);
    CHECK(ba_eq(*cell, s, n), "%s: cell holds %s", label, show_ba(*cell));
  }

  TVMFFIAny res;
  if (call_ok_impl(label, __LINE__, g_echo, &v, 1, &res)) {
    TVMFFIByteArray got;
    CHECK(res.type_index == v.type_index, "%s: echo type_index %d, sent %d", label,
          res.type_index, v.type_index);
    CHECK(bytes_view(&res, &got) && ba_eq(got, s, n), "%s: echo content %s", label,
          show_string_any(&res));
    if (!small && res.type_index == kTVMFFIBytes) {
      CHECK(res.v_obj == v.v_obj, "%s: echo returned object %p, sent %p", label,
            (void*)res.v_obj, (void*)v.v_obj);
      CHECK(strong_count(v.v_obj) == 2, "%s: strong count after echo %u", label,
            strong_count(v.v_obj));
    }
    any_release(&res);
  }
  any_release(&v);
}

static void test_bytes(void) {
  g_section = "bytes";
  bytes_case("empty bytes", "", 0);
  bytes_case("small bytes", "\x01\x00\x02", 3);
  bytes_case("7 bytes", "\xff\x00\xfe\x00\xfd\x00\x7f", 7);
  bytes_case("8 bytes", "\x00\x01\x02\x03\x04\x05\x06\x07", 8);
  bytes_case("large bytes", "\x00\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xb0\xc0\xd0\xe0\xf0",
             16);
}

/* Borrowed views (raw C string, byte-array pointer) become owned values. */
static void test_views(void) {
  g_section = "borrowed views";
  TVMFFIAny res;

  TVMFFIAny raw_short = mk_rawstr("hi");
  if (CALL_OK(g_echo, &raw_short, 1, &res)) {
    CHECK(res.type_index == kTVMFFISmallStr, "echo of raw \"hi\" has type_index %d",
          res.type_index);
    CHECK(any_is_string(&res, "hi", 2), "echo of raw \"hi\" gave %s", show_string_any(&res));
    any_release(&res);
  }

  const char* long_text = "a raw C string longer than seven bytes";
  TVMFFIAny raw_long = mk_rawstr(long_text);
  if (CALL_OK(g_echo, &raw_long, 1, &res)) {
    CHECK(res.type_index == kTVMFFIStr, "echo of a long raw string has type_index %d",
          res.type_index);
    CHECK(any_is_string(&res, long_text, strlen(long_text)), "content %s",
          show_string_any(&res));
    if (res.type_index == kTVMFFIStr) {
      CHECK(strong_count(res.v_obj) == 1, "owned copy has strong count %u",
            strong_count(res.v_obj));
      CHECK(((TVMFFIByteArray*)obj_cell(res.v_obj))->data != long_text,
            "result still points at the caller's buffer");
    }
    any_release(&res);
  }

  TVMFFIByteArray payload = ba_n("\x01\x02\x03\x00\x05\x06\x07\x08\x09\x0a", 10);
  TVMFFIAny bap = mk_none();
  bap.type_index = kTVMFFIByteArrayPtr;
  bap.v_ptr = &payload;
  if (CALL_OK(g_echo, &bap, 1, &res)) {
    TVMFFIByteArray got;
    CHECK(res.type_index == kTVMFFIBytes, "echo of TVMFFIByteArray* has type_index %d",
          res.type_index);
    CHECK(bytes_view(&res, &got) && ba_eq(got, payload.data, payload.size), "content %s",
          show_string_any(&res));
    any_release(&res);
  }

  /* TVMFFIAnyViewToOwnedAny */
  TVMFFIAny out = mk_none();
  TVMFFIAny i7 = mk_int(7);
  CHECK(TVMFFIAnyViewToOwnedAny(&i7, &out) == 0);
  CHECK(out.type_index == kTVMFFIInt && out.v_int64 == 7, "int view -> %s", show_any(&out));
  any_release(&out);

  CHECK(TVMFFIAnyViewToOwnedAny(&raw_short, &out) == 0);
  CHECK(out.type_index == kTVMFFISmallStr && any_is_string(&out, "hi", 2), "raw \"hi\" -> %s",
        show_any(&out));
  any_release(&out);

  CHECK(TVMFFIAnyViewToOwnedAny(&raw_long, &out) == 0);
  CHECK(out.type_index == kTVMFFIStr && any_is_string(&out, long_text, strlen(long_text)),
        "long raw string -> %s", show_any(&out));
  if (out.type_index == kTVMFFIStr) {
    CHECK(strong_count(out.v_obj) == 1, "owned copy has strong count %u",
          strong_count(out.v_obj));
  }
  any_release(&out);

  CHECK(TVMFFIAnyViewToOwnedAny(&bap, &out) == 0);
  {
    TVMFFIByteArray got;
    CHECK(bytes_view(&out, &got) && ba_eq(got, payload.data, payload.size),
          "byte-array view -> %s", show_any(&out));
  }
  any_release(&out);

  TVMFFIByteArray sb = ba_of("an object string for view tests");
  TVMFFIAny s = mk_none();
  CHECK(TVMFFIStringFromByteArray(&sb, &s) == 0);
  if (s.type_index == kTVMFFIStr) {
    CHECK(TVMFFIAnyViewToOwnedAny(&s, &out) == 0);
    CHECK(out.type_index == kTVMFFIStr && out.v_obj == s.v_obj, "object view -> %s",
          show_any(&out));
    CHECK(strong_count(s.v_obj) == 2, "owning an object view: strong count %u, expected 2",
          strong_count(s.v_obj));
    any_release(&out);
    CHECK(strong_count(s.v_obj) == 1, "strong count after release %u", strong_count(s.v_obj));
  }
  any_release(&s);
}

static void test_refcount(void) {
  g_section = "reference counts";
  TVMFFIByteArray sb = ba_of("reference counted string");
  TVMFFIAny s = mk_none();
  if (TVMFFIStringFromByteArray(&sb, &s) != 0 || s.type_index != kTVMFFIStr) {
    CHECK(0, "could not make a string object");
    return;
  }
  void* o = s.v_obj;
  CHECK(strong_count(o) == 1, "fresh object count %u", strong_count(o));
  CHECK(TVMFFIObjectIncRef(o) == 0);
  CHECK(strong_count(o) == 2, "after IncRef %u", strong_count(o));
  CHECK(TVMFFIObjectIncRef(o) == 0);
  CHECK(strong_count(o) == 3, "after IncRef x2 %u", strong_count(o));
  CHECK(TVMFFIObjectDecRef(o) == 0);
  CHECK(TVMFFIObjectDecRef(o) == 0);
  CHECK(strong_count(o) == 1, "after DecRef x2 %u", strong_count(o));
  CHECK(obj_type(o) == kTVMFFIStr, "type index changed to %d", obj_type(o));
  CHECK(((TVMFFIObject*)o)->deleter != NULL, "object header has no deleter");
  CHECK(TVMFFIObjectDecRef(o) == 0);
}

static void test_function_values(void) {
  g_section = "function values";
  if (g_echo == NULL) return;
  TVMFFIAny in = mk_obj(g_echo);
  uint32_t before = strong_count(g_echo);
  TVMFFIAny res;
  if (CALL_OK(g_echo, &in, 1, &res)) {
    CHECK(res.type_index == kTVMFFIFunction, "echo(echo) has type_index %d", res.type_index);
    CHECK(res.v_obj == (TVMFFIObject*)g_echo, "echo(echo) returned %p, sent %p",
          (void*)res.v_obj, g_echo);
    CHECK(strong_count(g_echo) == before + 1, "count %u -> %u", before, strong_count(g_echo));
    any_release(&res);
    CHECK(strong_count(g_echo) == before, "count after release %u, expected %u",
          strong_count(g_echo), before);
  }
  /* the function cell is right after the header; its safe_call is set */
  TVMFFIFunctionCell* cell = (TVMFFIFunctionCell*)obj_cell(g_echo);
  CHECK(cell->safe_call != NULL, "echo's TVMFFIFunctionCell.safe_call is NULL");
}

static void test_arrays(void) {
  g_section = "arrays";
  if (g_array == NULL || g_array_size == NULL || g_array_get == NULL) {
    CHECK(0, "ffi.Array / ffi.ArraySize / ffi.ArrayGetItem missing");
    return;
  }
  TVMFFIByteArray sb = ba_of("an array element that is an object");
  TVMFFIAny s = mk_none();
  if (TVMFFIStringFromByteArray(&sb, &s) != 0 || s.type_index != kTVMFFIStr) {
    CHECK(0, "could not make a string object");
    return;
  }
  TVMFFIByteArray hb = ba_of("hi");
  TVMFFIAny small = mk_none();
  CHECK(TVMFFIStringFromByteArray(&hb, &small) == 0);

  TVMFFIAny items[5];
  items[0] = mk_int(1);
  items[1] = s;
  items[2] = mk_float(3.5);
  items[3] = mk_none();
  items[4] = small;

  TVMFFIAny arr;
  if (!CALL_OK(g_array, items, 5, &arr)) {
    any_release(&s);
    return;
  }
  CHECK(arr.type_index == kTVMFFIArray, "ffi.Array returned %s", show_any(&arr));
  if (arr.type_index != kTVMFFIArray) {
    any_release(&arr);
    any_release(&s);
    return;
  }
  void* a = arr.v_obj;
  CHECK(obj_type(a) == kTVMFFIArray, "array header type_index %d", obj_type(a));
  CHECK(strong_count(a) == 1, "new array strong count %u", strong_count(a));
  CHECK(strong_count(s.v_obj) == 2, "string element count %u, expected 2 (ours + array's)",
        strong_count(s.v_obj));

  /* the sequence cell: data points at `size` TVMFFIAny slots */
  TVMFFISeqCell* seq = (TVMFFISeqCell*)obj_cell(a);
  CHECK(seq->size == 5, "TVMFFISeqCell.size is %lld", (long long)seq->size);
  CHECK(seq->capacity >= seq->size, "capacity %lld < size %lld", (long long)seq->capacity,
        (long long)seq->size);
  CHECK(seq->data != NULL, "TVMFFISeqCell.data is NULL");
  if (seq->data != NULL && seq->size == 5) {
    TVMFFIAny* d = (TVMFFIAny*)seq->data;
    CHECK(d[0].type_index == kTVMFFIInt && d[0].v_int64 == 1, "slot 0 %s", show_any(&d[0]));
    CHECK(d[1].type_index == kTVMFFIStr && d[1].v_obj == s.v_obj, "slot 1 %s", show_any(&d[1]));
    CHECK(d[2].type_index == kTVMFFIFloat && d[2].v_float64 == 3.5, "slot 2 %s",
          show_any(&d[2]));
    CHECK(d[3].type_index == kTVMFFINone, "slot 3 %s", show_any(&d[3]));
    CHECK(d[4].type_index == kTVMFFISmallStr && any_is_string(&d[4], "hi", 2), "slot 4 %s",
          show_any(&d[4]));
  }

  TVMFFIAny res;
  if (CALL_OK(g_array_size, &arr, 1, &res)) {
    CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 5, "ffi.ArraySize gave %s",
          show_any(&res));
    any_release(&res);
  }

  TVMFFIAny args[2];
  args[0] = arr;
  args[1] = mk_int(1);
  if (CALL_OK(g_array_get, args, 2, &res)) {
    CHECK(res.type_index == kTVMFFIStr && res.v_obj == s.v_obj, "ArrayGetItem(arr, 1) gave %s",
          show_any(&res));
    CHECK(strong_count(s.v_obj) == 3, "element count while held %u, expected 3",
          strong_count(s.v_obj));
    any_release(&res);
    CHECK(strong_count(s.v_obj) == 2, "element count after release %u", strong_count(s.v_obj));
  }
  args[1] = mk_int(0);
  if (CALL_OK(g_array_get, args, 2, &res)) {
    CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 1, "ArrayGetItem(arr, 0) gave %s",
          show_any(&res));
    any_release(&res);
  }
  args[1] = mk_int(2);
  if (CALL_OK(g_array_get, args, 2, &res)) {
    CHECK(res.type_index == kTVMFFIFloat && res.v_float64 == 3.5, "ArrayGetItem(arr, 2) gave %s",
          show_any(&res));
    any_release(&res);
  }
  args[1] = mk_int(4);
  if (CALL_OK(g_array_get, args, 2, &res)) {
    CHECK(any_is_string(&res, "hi", 2), "ArrayGetItem(arr, 4) gave %s", show_any(&res));
    any_release(&res);
  }
  args[1] = mk_int(5);
  void* err = CALL_FAILS(g_array_get, args, 2);
  if (err) {
    CHECK(ba_eq_str(err_cell(err)->kind, "IndexError"), "out-of-range index raised %s",
          show_error(err));
    TVMFFIObjectDecRef(err);
  }

  /* the array passes through echo as the same object */
  if (CALL_OK(g_echo, &arr, 1, &res)) {
    CHECK(res.type_index == kTVMFFIArray && res.v_obj == arr.v_obj, "echo(array) gave %s",
          show_any(&res));
    CHECK(strong_count(a) == 2, "array count after echo %u", strong_count(a));
    any_release(&res);
    CHECK(strong_count(a) == 1, "array count after release %u", strong_count(a));
  }

  /* nesting: an array holding the array */
  TVMFFIAny outer;
  if (CALL_OK(g_array, &arr, 1, &outer)) {
    CHECK(outer.type_index == kTVMFFIArray, "outer array %s", show_any(&outer));
    CHECK(strong_count(a) == 2, "inner array count %u, expected 2", strong_count(a));
    any_release(&outer);
    CHECK(strong_count(a) == 1, "inner array count after outer freed %u", strong_count(a));
  }

  /* dropping the array drops its reference to the element */
  any_release(&arr);
  CHECK(strong_count(s.v_obj) == 1, "element count after array freed %u, expected 1",
        strong_count(s.v_obj));
  any_release(&s);

  /* empty array */
  TVMFFIAny empty;
  if (CALL_OK(g_array, NULL, 0, &empty)) {
    CHECK(empty.type_index == kTVMFFIArray, "ffi.Array() gave %s", show_any(&empty));
    if (CALL_OK(g_array_size, &empty, 1, &res)) {
      CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 0, "size of empty array %s",
            show_any(&res));
      any_release(&res);
    }
    any_release(&empty);
  }
}

/* ------------------------------------------------------------------------ */
/* C callbacks                                                                */
/* ------------------------------------------------------------------------ */

typedef struct {
  int calls;
  int deletes;
  void* last_self;
} CallbackState;

static int cb_add(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  CallbackState* st = (CallbackState*)self;
  if (st != NULL) {
    st->calls++;
    st->last_self = self;
  }
  CHECK(result != NULL && result->type_index == kTVMFFINone,
        "callback's result slot not preset to None");
  int64_t sum = 0;
  for (int32_t i = 0; i < num_args; ++i) {
    if (args[i].type_index != kTVMFFIInt) {
      TVMFFIErrorSetRaisedFromCStr("TypeError", "cb_add takes only ints");
      return -1;
    }
    sum += args[i].v_int64;
  }
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = sum;
  return 0;
}

static void cb_delete(void* self) { ((CallbackState*)self)->deletes++; }

/* Same sum, for functions created without self: never touches `self`, which a
 * runtime may set to anything (TVM-FFI passes the function object itself). */
static int cb_add_stateless(void* self, const TVMFFIAny* args, int32_t num_args,
                            TVMFFIAny* result) {
  (void)self;
  int64_t sum = 0;
  for (int32_t i = 0; i < num_args; ++i) {
    if (args[i].type_index != kTVMFFIInt) {
      TVMFFIErrorSetRaisedFromCStr("TypeError", "cb_add takes only ints");
      return -1;
    }
    sum += args[i].v_int64;
  }
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = sum;
  return 0;
}

static int cb_make_string(void* self, const TVMFFIAny* args, int32_t num_args,
                          TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)num_args;
  TVMFFIByteArray b = ba_of("a string created inside a C callback");
  return TVMFFIStringFromByteArray(&b, result);
}

static int cb_keep_first(void* self, const TVMFFIAny* args, int32_t num_args,
                         TVMFFIAny* result) {
  (void)self;
  if (num_args < 1) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "cb_keep_first needs an argument");
    return -1;
  }
  return TVMFFIAnyViewToOwnedAny(&args[0], result);
}

static int cb_raise_cstr(void* self, const TVMFFIAny* args, int32_t num_args,
                         TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  TVMFFIErrorSetRaisedFromCStr("RuntimeError", "boom from C");
  return -1;
}

static int cb_raise_parts(void* self, const TVMFFIAny* args, int32_t num_args,
                          TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  const char* parts[3] = {"index ", "7", " is out of range"};
  TVMFFIErrorSetRaisedFromCStrParts("IndexError", parts, 3);
  return -1;
}

/* raises the Error object passed as `self` (TVMFFIErrorSetRaised adds a ref) */
static int cb_raise_object(void* self, const TVMFFIAny* args, int32_t num_args,
                           TVMFFIAny* result) {
  (void)args;
  (void)num_args;
  (void)result;
  TVMFFIErrorSetRaised(self);
  return -1;
}

static void* make_function(void* self, TVMFFISafeCallType fn, void (*deleter)(void*)) {
  void* f = NULL;
  int rc = TVMFFIFunctionCreate(self, fn, deleter, &f);
  if (rc != 0) {
    void* err = take_error();
    CHECK(rc == 0, "TVMFFIFunctionCreate returned %d: %s", rc, show_error(err));
    if (err) TVMFFIObjectDecRef(err);
    return NULL;
  }
  CHECK(f != NULL, "TVMFFIFunctionCreate gave NULL");
  if (f != NULL) {
    CHECK(obj_type(f) == kTVMFFIFunction, "created function has type_index %d", obj_type(f));
    CHECK(strong_count(f) == 1, "created function strong count %u", strong_count(f));
    /* C++ callers use cpp_call when it is set; it must stay NULL for C functions */
    CHECK(((TVMFFIFunctionCell*)obj_cell(f))->cpp_call == NULL,
          "created function has cpp_call %p, must be NULL",
          ((TVMFFIFunctionCell*)obj_cell(f))->cpp_call);
  }
  return f;
}

static void test_callbacks(void) {
  g_section = "C callbacks";
  CallbackState st;
  memset(&st, 0, sizeof(st));
  void* f = make_function(&st, cb_add, cb_delete);
  if (f == NULL) return;
  TVMFFIAny res;

  /* direct call */
  TVMFFIAny three[3] = {mk_int(1), mk_int(2), mk_int(39)};
  if (CALL_OK(f, three, 3, &res)) {
    CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 42, "direct call gave %s",
          show_any(&res));
  }
  CHECK(st.calls == 1, "callback ran %d times", st.calls);
  CHECK(st.last_self == &st, "callback saw self %p, expected %p", st.last_self, (void*)&st);

  /* through testing.apply(f, 1, 2, 39) */
  TVMFFIAny args[4] = {mk_obj(f), mk_int(1), mk_int(2), mk_int(39)};
  if (CALL_OK(g_apply, args, 4, &res)) {
    CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 42, "apply(f, 1, 2, 39) gave %s",
          show_any(&res));
    any_release(&res);
  }
  CHECK(st.calls == 2, "callback ran %d times, expected 2", st.calls);
  args[1] = mk_int(100);
  args[2] = mk_int(-58);
  if (CALL_OK(g_apply, args, 3, &res)) {
    CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 42, "apply(f, 100, -58) gave %s",
          show_any(&res));
  }
  if (CALL_OK(g_apply, args, 1, &res)) {
    CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 0, "apply(f) gave %s", show_any(&res));
  }
  CHECK(st.calls == 4, "callback ran %d times, expected 4", st.calls);

  /* the callback's own error reaches the caller */
  args[1] = mk_float(1.5);
  void* err = CALL_FAILS(g_apply, args, 2);
  if (err) {
    CHECK(ba_eq_str(err_cell(err)->kind, "TypeError") &&
              ba_eq_str(err_cell(err)->message, "cb_add takes only ints"),
          "got %s", show_error(err));
    TVMFFIObjectDecRef(err);
  }

  CHECK(strong_count(f) == 1, "after calls the function count is %u, expected 1",
        strong_count(f));
  CHECK(st.deletes == 0, "deleter ran while references remain");

  /* echo returns the same function object */
  TVMFFIAny fv = mk_obj(f);
  if (CALL_OK(g_echo, &fv, 1, &res)) {
    CHECK(res.type_index == kTVMFFIFunction && res.v_obj == (TVMFFIObject*)f,
          "echo(callback) gave %s", show_any(&res));
    CHECK(strong_count(f) == 2, "count with echo result %u", strong_count(f));
    any_release(&res);
  }
  TVMFFIObjectIncRef(f);
  TVMFFIObjectDecRef(f);
  CHECK(st.deletes == 0, "deleter ran while a reference remains");
  CHECK(strong_count(f) == 1, "count %u before final release", strong_count(f));

  /* calling through the function cell, the way C++ callers do: handle = object */
  TVMFFIFunctionCell* cell = (TVMFFIFunctionCell*)obj_cell(f);
  CHECK(cell->safe_call != NULL, "created function has no safe_call in its cell");
  if (cell->safe_call != NULL) {
    TVMFFIAny two[2] = {mk_int(20), mk_int(22)};
    res = mk_none();
    st.last_self = NULL;
    int rc = cell->safe_call(f, two, 2, &res);
    CHECK(rc == 0, "cell safe_call returned %d", rc);
    CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 42, "cell safe_call gave %s",
          show_any(&res));
    CHECK(st.last_self == &st, "cell safe_call: callback saw self %p, expected %p", st.last_self,
          (void*)&st);
    if (rc != 0) {
      void* e = take_error();
      if (e) TVMFFIObjectDecRef(e);
    }
  }

  /* the last reference runs the deleter exactly once, with our self */
  TVMFFIObjectDecRef(f);
  CHECK(st.deletes == 1, "deleter ran %d times, expected 1", st.deletes);

  /* no self, no deleter */
  void* g = make_function(NULL, cb_add_stateless, NULL);
  if (g != NULL) {
    TVMFFIAny a2[3] = {mk_obj(g), mk_int(40), mk_int(2)};
    if (CALL_OK(g_apply, a2, 3, &res)) {
      CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 42, "apply(g, 40, 2) gave %s",
            show_any(&res));
    }
    TVMFFIObjectDecRef(g);
  }

  /* a callback returning a new object hands ownership to the caller */
  void* mk = make_function(NULL, cb_make_string, NULL);
  if (mk != NULL) {
    TVMFFIAny a1 = mk_obj(mk);
    if (CALL_OK(g_apply, &a1, 1, &res)) {
      const char* want = "a string created inside a C callback";
      CHECK(res.type_index == kTVMFFIStr && any_is_string(&res, want, strlen(want)),
            "apply(make_string) gave %s", show_string_any(&res));
      if (res.type_index == kTVMFFIStr) {
        CHECK(strong_count(res.v_obj) == 1, "returned string count %u, expected 1",
              strong_count(res.v_obj));
      }
      any_release(&res);
    }
    TVMFFIObjectDecRef(mk);
  }

  /* a callback keeping an object argument returns it with one more reference */
  void* keep = make_function(NULL, cb_keep_first, NULL);
  TVMFFIByteArray sb = ba_of("passed through apply to a C callback");
  TVMFFIAny s = mk_none();
  if (keep != NULL && TVMFFIStringFromByteArray(&sb, &s) == 0 && s.type_index == kTVMFFIStr) {
    TVMFFIAny a2[2] = {mk_obj(keep), s};
    if (CALL_OK(g_apply, a2, 2, &res)) {
      CHECK(res.type_index == kTVMFFIStr && res.v_obj == s.v_obj, "apply(keep, s) gave %s",
            show_any(&res));
      CHECK(strong_count(s.v_obj) == 2, "string count after apply %u, expected 2",
            strong_count(s.v_obj));
      any_release(&res);
      CHECK(strong_count(s.v_obj) == 1, "string count after release %u", strong_count(s.v_obj));
    }
    /* plain values come through intact too */
    TVMFFIAny a3[2] = {mk_obj(keep), mk_device(kDLCUDA, 5)};
    if (CALL_OK(g_apply, a3, 2, &res)) {
      CHECK(res.type_index == kTVMFFIDevice && res.v_device.device_type == kDLCUDA &&
                res.v_device.device_id == 5,
            "apply(keep, cuda:5) gave %s", show_any(&res));
    }
  }
  any_release(&s);
  if (keep) TVMFFIObjectDecRef(keep);

  /* apply with a non-function first argument is a TypeError */
  TVMFFIAny notf[2] = {mk_int(3), mk_int(4)};
  err = CALL_FAILS(g_apply, notf, 2);
  if (err) {
    CHECK(ba_eq_str(err_cell(err)->kind, "TypeError"), "apply(3, 4) raised %s",
          show_error(err));
    TVMFFIObjectDecRef(err);
  }
}

static void test_direct_cell_call(void) {
  g_section = "direct safe_call";
  if (g_echo == NULL) return;
  TVMFFIFunctionCell* cell = (TVMFFIFunctionCell*)obj_cell(g_echo);
  if (cell->safe_call == NULL) {
    CHECK(0, "echo has no safe_call");
    return;
  }
  TVMFFIAny in = mk_int(5);
  TVMFFIAny res = mk_none();
  int rc = cell->safe_call(g_echo, &in, 1, &res);
  CHECK(rc == 0, "echo cell safe_call returned %d", rc);
  CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 5, "echo cell safe_call gave %s",
        show_any(&res));
  any_release(&res);

  if (g_raise != NULL) {
    TVMFFIFunctionCell* rc_cell = (TVMFFIFunctionCell*)obj_cell(g_raise);
    TVMFFIAny a[2] = {mk_rawstr("KeyError"), mk_rawstr("raised via the cell")};
    res = mk_none();
    rc = rc_cell->safe_call(g_raise, a, 2, &res);
    CHECK(rc == -1, "raise via cell returned %d", rc);
    void* err = take_error();
    CHECK(err != NULL && obj_type(err) == kTVMFFIError &&
              ba_eq_str(err_cell(err)->kind, "KeyError") &&
              ba_eq_str(err_cell(err)->message, "raised via the cell"),
          "got %s", show_error(err));
    if (err) TVMFFIObjectDecRef(err);
  }
}

/* ------------------------------------------------------------------------ */
/* errors                                                                     */
/* ------------------------------------------------------------------------ */

static void expect_error(void* err, const char* kind, const char* message, int line) {
  if (err == NULL) return;
  g_line = line;
  TVMFFIErrorCell* c = err_cell(err);
  check_impl(ba_eq_str(c->kind, kind), "error kind", line, "kind %s, expected \"%s\"",
             show_ba(c->kind), kind);
  check_impl(ba_eq_str(c->message, message), "error message", line,
             "message %s, expected \"%s\"", show_ba(c->message), message);
  check_impl(strong_count(err) == 1, "moved-out error has strong count 1", line, "count %u",
             strong_count(err));
}
#define EXPECT_ERROR(err, kind, msg) expect_error(err, kind, msg, __LINE__)

static void test_errors(void) {
  g_section = "errors";
  void* none = (void*)0x1;
  TVMFFIErrorMoveFromRaised(&none);
  CHECK(none == NULL, "no error pending at start, but MoveFromRaised gave %p", none);

  /* testing.test_raise_error("ValueError", "some message"), with raw C strings */
  TVMFFIAny a[2] = {mk_rawstr("ValueError"), mk_rawstr("some message")};
  void* err = CALL_FAILS(g_raise, a, 2);
  if (err) {
    EXPECT_ERROR(err, "ValueError", "some message");
    TVMFFIErrorCell* c = err_cell(err);
    CHECK(c->backtrace.size == 0 || c->backtrace.data != NULL, "backtrace has size but no data");
    CHECK(c->update_backtrace != NULL, "TVMFFIErrorCell.update_backtrace is NULL");
    CHECK(c->cause_chain == NULL, "unexpected cause_chain %p", c->cause_chain);
    TVMFFIObjectDecRef(err);
  }
  none = (void*)0x1;
  TVMFFIErrorMoveFromRaised(&none);
  CHECK(none == NULL, "error slot not emptied by MoveFromRaised (got %p)", none);

  /* same with String values as arguments (one small, one object) */
  TVMFFIByteArray kb = ba_of("KeyError");
  TVMFFIByteArray mb = ba_of("a message long enough to be an object");
  TVMFFIAny ks = mk_none(), ms = mk_none();
  CHECK(TVMFFIStringFromByteArray(&kb, &ks) == 0);
  CHECK(TVMFFIStringFromByteArray(&mb, &ms) == 0);
  TVMFFIAny b[2] = {ks, ms};
  err = CALL_FAILS(g_raise, b, 2);
  if (err) {
    EXPECT_ERROR(err, "KeyError", "a message long enough to be an object");
    TVMFFIObjectDecRef(err);
  }
  if (ms.type_index == kTVMFFIStr) {
    CHECK(strong_count(ms.v_obj) == 1, "message string count %u after the call",
          strong_count(ms.v_obj));
  }
  any_release(&ks);
  any_release(&ms);

  /* TVMFFIErrorCreate */
  TVMFFIByteArray ek = ba_of("AttributeError");
  TVMFFIByteArray em = ba_of("made by TVMFFIErrorCreate");
  TVMFFIByteArray eb = ba_of("frame one\nframe two\n");
  void* made = NULL;
  int rc = TVMFFIErrorCreate(&ek, &em, &eb, &made);
  CHECK(rc == 0 && made != NULL, "TVMFFIErrorCreate returned %d, %p", rc, made);
  if (rc == 0 && made != NULL) {
    TVMFFIErrorCell* c = err_cell(made);
    CHECK(obj_type(made) == kTVMFFIError, "type_index %d", obj_type(made));
    CHECK(strong_count(made) == 1, "count %u", strong_count(made));
    CHECK(ba_eq_str(c->kind, "AttributeError"), "kind %s", show_ba(c->kind));
    CHECK(ba_eq_str(c->message, "made by TVMFFIErrorCreate"), "message %s", show_ba(c->message));
    CHECK(ba_eq_str(c->backtrace, "frame one\nframe two\n"), "backtrace %s",
          show_ba(c->backtrace));
    CHECK(c->cause_chain == NULL && c->extra_context == NULL, "cause %p, extra %p",
          c->cause_chain, c->extra_context);

    /* raise it from a callback through testing.apply: the same object arrives */
    void* f = make_function(made, cb_raise_object, NULL);
    if (f != NULL) {
      TVMFFIAny fa = mk_obj(f);
      err = CALL_FAILS(g_apply, &fa, 1);
      if (err) {
        CHECK(err == made, "raised %p, expected the created error %p", err, made);
        CHECK(ba_eq_str(err_cell(err)->kind, "AttributeError") &&
                  ba_eq_str(err_cell(err)->message, "made by TVMFFIErrorCreate"),
              "got %s", show_error(err));
        CHECK(strong_count(made) == (err == made ? 2u : 1u), "error count %u",
              strong_count(made));
        TVMFFIObjectDecRef(err);
      }
      TVMFFIObjectDecRef(f);
    }
    CHECK(strong_count(made) == 1, "error count %u after all", strong_count(made));
    TVMFFIObjectDecRef(made);
  }

  /* TVMFFIErrorSetRaised + MoveFromRaised directly, without any call */
  made = NULL;
  if (TVMFFIErrorCreate(&ek, &em, &eb, &made) == 0 && made != NULL) {
    TVMFFIErrorSetRaised(made);
    CHECK(strong_count(made) == 2, "SetRaised should add a reference: count %u",
          strong_count(made));
    err = take_error();
    CHECK(err == made, "moved %p, raised %p", err, made);
    if (err) TVMFFIObjectDecRef(err);
    TVMFFIObjectDecRef(made);
  }

  /* C callback raising with TVMFFIErrorSetRaisedFromCStr */
  void* f = make_function(NULL, cb_raise_cstr, NULL);
  if (f != NULL) {
    TVMFFIAny fa = mk_obj(f);
    err = CALL_FAILS(g_apply, &fa, 1);
    if (err) {
      EXPECT_ERROR(err, "RuntimeError", "boom from C");
      TVMFFIObjectDecRef(err);
    }
    err = CALL_FAILS(f, NULL, 0);
    if (err) {
      EXPECT_ERROR(err, "RuntimeError", "boom from C");
      TVMFFIObjectDecRef(err);
    }
    TVMFFIObjectDecRef(f);
  }

  /* C callback raising with TVMFFIErrorSetRaisedFromCStrParts */
  f = make_function(NULL, cb_raise_parts, NULL);
  if (f != NULL) {
    TVMFFIAny fa = mk_obj(f);
    err = CALL_FAILS(g_apply, &fa, 1);
    if (err) {
      EXPECT_ERROR(err, "IndexError", "index 7 is out of range");
      TVMFFIObjectDecRef(err);
    }
    /* two levels of apply */
    TVMFFIAny twice[2] = {mk_obj(g_apply), fa};
    err = CALL_FAILS(g_apply, twice, 2);
    if (err) {
      EXPECT_ERROR(err, "IndexError", "index 7 is out of range");
      TVMFFIObjectDecRef(err);
    }
    TVMFFIObjectDecRef(f);
  }

  /* raising outside of any call, then collecting */
  const char* one_part[1] = {"only part"};
  TVMFFIErrorSetRaisedFromCStrParts("ValueError", one_part, 1);
  err = take_error();
  CHECK(err != NULL, "SetRaisedFromCStrParts with one part raised nothing");
  if (err) {
    EXPECT_ERROR(err, "ValueError", "only part");
    TVMFFIObjectDecRef(err);
  }
  /* NULL parts are skipped (checked in a child process, so a crash is reported
   * as a failure instead of ending the run) */
  {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      const char* with_null[4] = {"left", NULL, "-right", NULL};
      TVMFFIErrorSetRaisedFromCStrParts("ValueError", with_null, 4);
      void* e = take_error();
      int ok = e != NULL && ba_eq_str(err_cell(e)->kind, "ValueError") &&
               ba_eq_str(err_cell(e)->message, "left-right");
      if (!ok) printf("     child saw %s\n", show_error(e));
      fflush(stdout);
      if (e) TVMFFIObjectDecRef(e);
      _exit(ok ? 0 : 1);
    }
    int wst = 0;
    CHECK(pid > 0 && waitpid(pid, &wst, 0) == pid, "fork/wait failed");
    CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
          "SetRaisedFromCStrParts(\"ValueError\", {\"left\", NULL, \"-right\", NULL}) should "
          "give \"left-right\": child %s %d",
          WIFSIGNALED(wst) ? "crashed with signal" : "exited with", WIFSIGNALED(wst)
                                                                     ? WTERMSIG(wst)
                                                                     : WEXITSTATUS(wst));
  }

  TVMFFIErrorSetRaisedFromCStr("RuntimeError", "first");
  TVMFFIErrorSetRaisedFromCStr("ValueError", "second replaces first");
  err = take_error();
  CHECK(err != NULL, "SetRaisedFromCStr raised nothing");
  if (err) {
    EXPECT_ERROR(err, "ValueError", "second replaces first");
    TVMFFIObjectDecRef(err);
  }

  /* argument errors: wrong type, wrong count */
  TVMFFIAny s = mk_rawstr("not a number");
  err = CALL_FAILS(g_add_one, &s, 1);
  if (err) {
    CHECK(ba_eq_str(err_cell(err)->kind, "TypeError"), "add_one(str) raised %s",
          show_error(err));
    CHECK(err_cell(err)->message.size > 0, "add_one(str): empty message");
    TVMFFIObjectDecRef(err);
  }
  TVMFFIAny ss = mk_none();
  TVMFFIByteArray hb = ba_of("hi");
  CHECK(TVMFFIStringFromByteArray(&hb, &ss) == 0);
  err = CALL_FAILS(g_add_one, &ss, 1);
  if (err) {
    CHECK(ba_eq_str(err_cell(err)->kind, "TypeError"), "add_one(small str) raised %s",
          show_error(err));
    TVMFFIObjectDecRef(err);
  }
  err = CALL_FAILS(g_add_one, NULL, 0);
  if (err) {
    CHECK(ba_eq_str(err_cell(err)->kind, "TypeError"), "add_one() raised %s", show_error(err));
    TVMFFIObjectDecRef(err);
  }
  TVMFFIAny two[2] = {mk_int(1), mk_int(2)};
  err = CALL_FAILS(g_add_one, two, 2);
  if (err) {
    CHECK(ba_eq_str(err_cell(err)->kind, "TypeError"), "add_one(1, 2) raised %s",
          show_error(err));
    TVMFFIObjectDecRef(err);
  }
  TVMFFIAny one_arg = mk_rawstr("ValueError");
  err = CALL_FAILS(g_raise, &one_arg, 1);
  if (err) {
    CHECK(ba_eq_str(err_cell(err)->kind, "TypeError"), "test_raise_error(kind) raised %s",
          show_error(err));
    TVMFFIObjectDecRef(err);
  }

  /* after all that, a normal call works and nothing stale is pending */
  TVMFFIAny res;
  TVMFFIAny x = mk_int(-1);
  if (CALL_OK(g_add_one, &x, 1, &res)) {
    CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 0, "add_one(-1) gave %s",
          show_any(&res));
  }
  none = (void*)0x1;
  TVMFFIErrorMoveFromRaised(&none);
  CHECK(none == NULL, "stale error pending after a successful call: %s", show_error(none));
  if (none != NULL && none != (void*)0x1) TVMFFIObjectDecRef(none);
}

/* ------------------------------------------------------------------------ */
/* global registration                                                        */
/* ------------------------------------------------------------------------ */

static CallbackState g_reg_state_a;
static CallbackState g_reg_state_b;

static int cb_mul2(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  CallbackState* st = (CallbackState*)self;
  st->calls++;
  st->last_self = self;
  if (num_args != 1 || args[0].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "mul2 takes one int");
    return -1;
  }
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = args[0].v_int64 * (st == &g_reg_state_a ? 2 : 3);
  return 0;
}

static void test_set_global(void) {
  g_section = "set global";
  const char* name = "kiln_ctest.mul2";
  TVMFFIByteArray nb = ba_of(name);
  void* fa = make_function(&g_reg_state_a, cb_mul2, cb_delete);
  void* fb = make_function(&g_reg_state_b, cb_mul2, cb_delete);
  if (fa == NULL || fb == NULL) return;

  int rc = TVMFFIFunctionSetGlobal(&nb, fa, 0);
  CHECK(rc == 0, "SetGlobal returned %d", rc);
  if (rc != 0) {
    void* err = take_error();
    printf("     error: %s\n", show_error(err));
    if (err) TVMFFIObjectDecRef(err);
  }
  CHECK(strong_count(fa) == 2, "registry should hold a reference: count %u", strong_count(fa));

  void* g = get_global(name);
  CHECK(g == fa, "GetGlobal returned %p, registered %p", g, fa);
  if (g != NULL) {
    TVMFFIAny x = mk_int(21);
    TVMFFIAny res;
    if (CALL_OK(g, &x, 1, &res)) {
      CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 42, "mul2(21) gave %s",
            show_any(&res));
    }
    CHECK(g_reg_state_a.last_self == &g_reg_state_a, "registered function saw self %p",
          g_reg_state_a.last_self);
    TVMFFIAny ap[2] = {mk_obj(g), mk_int(50)};
    if (CALL_OK(g_apply, ap, 2, &res)) {
      CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 100, "apply(mul2, 50) gave %s",
            show_any(&res));
    }
    TVMFFIObjectDecRef(g);
  }

  /* re-registering without allow_override fails and keeps the old one */
  rc = TVMFFIFunctionSetGlobal(&nb, fb, 0);
  CHECK(rc != 0, "re-registering without override returned 0");
  if (rc != 0) {
    void* err = take_error();
    CHECK(err != NULL, "re-registering failed (%d) but raised nothing", rc);
    if (err) TVMFFIObjectDecRef(err);
  }
  g = get_global(name);
  CHECK(g == fa, "after refused override GetGlobal gives %p, expected %p", g, fa);
  if (g) TVMFFIObjectDecRef(g);

  /* with allow_override the new one replaces it and the old reference is dropped */
  rc = TVMFFIFunctionSetGlobal(&nb, fb, 1);
  CHECK(rc == 0, "override returned %d", rc);
  if (rc != 0) {
    void* err = take_error();
    if (err) TVMFFIObjectDecRef(err);
  }
  g = get_global(name);
  CHECK(g == fb, "after override GetGlobal gives %p, expected %p", g, fb);
  if (g != NULL) {
    TVMFFIAny x = mk_int(14);
    TVMFFIAny res;
    if (CALL_OK(g, &x, 1, &res)) {
      CHECK(res.type_index == kTVMFFIInt && res.v_int64 == 42, "overridden mul2(14) gave %s",
            show_any(&res));
    }
    TVMFFIObjectDecRef(g);
  }
  CHECK(strong_count(fa) == 1, "replaced function count %u, expected 1", strong_count(fa));
  TVMFFIObjectDecRef(fa);
  CHECK(g_reg_state_a.deletes == 1, "replaced function's deleter ran %d times",
        g_reg_state_a.deletes);
  /* fb now belongs to the registry alone */
  CHECK(strong_count(fb) == 2, "registered function count %u, expected 2", strong_count(fb));
  TVMFFIObjectDecRef(fb);
  CHECK(g_reg_state_b.deletes == 0, "registered function was deleted");
}

/* ------------------------------------------------------------------------ */
/* TVMFFIHandleInitOnce                                                       */
/* ------------------------------------------------------------------------ */

static int g_token_a, g_token_b;
static int g_init_calls;
static int g_slow_init_calls;

static int init_a(void** result) {
  g_init_calls++;
  *result = &g_token_a;
  return 0;
}

static int init_fails(void** result) {
  (void)result;
  g_init_calls++;
  TVMFFIErrorSetRaisedFromCStr("RuntimeError", "init failed on purpose");
  return -1;
}

static int init_slow(void** result) {
  __atomic_add_fetch(&g_slow_init_calls, 1, __ATOMIC_SEQ_CST);
  usleep(20000);
  *result = &g_token_b;
  return 0;
}

#define INIT_THREADS 8
static void* g_shared_handle;
static pthread_barrier_t g_barrier;

typedef struct {
  int rc;
  void* seen;
} InitResult;

static void* init_thread(void* arg) {
  InitResult* r = (InitResult*)arg;
  pthread_barrier_wait(&g_barrier);
  r->rc = TVMFFIHandleInitOnce(&g_shared_handle, init_slow);
  r->seen = __atomic_load_n(&g_shared_handle, __ATOMIC_ACQUIRE);
  return NULL;
}

static void test_init_once(void) {
  g_section = "init once";
  static void* h1 = NULL;
  g_init_calls = 0;
  CHECK(TVMFFIHandleInitOnce(&h1, init_a) == 0);
  CHECK(h1 == &g_token_a, "handle is %p, expected %p", h1, (void*)&g_token_a);
  CHECK(TVMFFIHandleInitOnce(&h1, init_a) == 0);
  CHECK(TVMFFIHandleInitOnce(&h1, init_a) == 0);
  CHECK(g_init_calls == 1, "init ran %d times, expected 1", g_init_calls);

  /* an already set handle is left alone */
  static void* h2 = &g_token_b;
  g_init_calls = 0;
  CHECK(TVMFFIHandleInitOnce(&h2, init_a) == 0);
  CHECK(g_init_calls == 0 && h2 == &g_token_b, "init ran %d times on a set handle",
        g_init_calls);

  /* a failing init reports its error and leaves the handle unset; a retry works */
  static void* h3 = NULL;
  g_init_calls = 0;
  int rc = TVMFFIHandleInitOnce(&h3, init_fails);
  CHECK(rc != 0, "failing init gave rc 0");
  CHECK(h3 == NULL, "handle set to %p after failed init", h3);
  void* err = take_error();
  CHECK(err != NULL, "failed init raised nothing");
  if (err) {
    EXPECT_ERROR(err, "RuntimeError", "init failed on purpose");
    TVMFFIObjectDecRef(err);
  }
  CHECK(TVMFFIHandleInitOnce(&h3, init_a) == 0);
  CHECK(h3 == &g_token_a && g_init_calls == 2, "retry: handle %p, %d init calls", h3,
        g_init_calls);

  /* many threads racing: one init */
  pthread_t th[INIT_THREADS];
  InitResult results[INIT_THREADS];
  memset(results, 0, sizeof(results));
  pthread_barrier_init(&g_barrier, NULL, INIT_THREADS);
  for (int i = 0; i < INIT_THREADS; ++i) pthread_create(&th[i], NULL, init_thread, &results[i]);
  for (int i = 0; i < INIT_THREADS; ++i) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&g_barrier);
  CHECK(g_slow_init_calls == 1, "%d threads: init ran %d times", INIT_THREADS,
        g_slow_init_calls);
  int all_ok = 1;
  for (int i = 0; i < INIT_THREADS; ++i) {
    if (results[i].rc != 0 || results[i].seen != &g_token_b) all_ok = 0;
  }
  CHECK(all_ok, "some thread got a failure or saw an unset handle");
}

/* ------------------------------------------------------------------------ */

static void release_globals(void) {
  void** all[] = {&g_echo, &g_nop, &g_add_one, &g_apply, &g_raise,
                  &g_array, &g_array_size, &g_array_get};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) {
    if (*all[i] != NULL) TVMFFIObjectDecRef(*all[i]);
    *all[i] = NULL;
  }
}

int main(void) {
  const char* v = getenv("KILN_TEST_VERBOSE");
  g_verbose = v != NULL && v[0] != '\0' && v[0] != '0';
  signal(SIGSEGV, on_crash);
  signal(SIGBUS, on_crash);
  signal(SIGABRT, on_crash);
  signal(SIGFPE, on_crash);
  setvbuf(stdout, NULL, _IOLBF, 0);

  test_version();
  test_type_keys();
  test_type_info();
  test_globals();
  if (g_echo == NULL) {
    printf("FAIL testing.echo is not registered; cannot continue\n");
    g_fail++;
  } else {
    test_echo_plain();
    test_dtype();
    test_strings();
    test_bytes();
    test_views();
    test_refcount();
    test_function_values();
    test_arrays();
    test_callbacks();
    test_direct_cell_call();
    test_errors();
    test_set_global();
  }
  test_init_once();
  release_globals();

  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}
