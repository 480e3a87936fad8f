/*
 * run_model.c -- run a model compiled by `kiln compile` from C.
 *
 *   run_model LIBRARY [NAME=FILE.npy ...] [-o OUT_DIR]
 *
 * Loads LIBRARY (a deploy.so) with libkiln_runtime through the TVM-FFI C ABI
 * (<kiln/c_api.h>), calls its `default` function with the CPU device to make a
 * graph executor, copies each NAME=FILE.npy into the input NAME, runs, and
 * writes every output K to OUT_DIR/output_K.npy (default: the current
 * directory), in the same byte layout as `kiln run`.  Inputs not given keep
 * the executor's initial contents, so give every runtime input.
 *
 * The same program works against Apache TVM's runtime (libtvm_ffi.so plus
 * libtvm_runtime.so), which exposes the same global functions.
 *
 * Build (see examples/c/README.md):
 *   cc -std=c11 -O2 examples/c/run_model.c -Iinclude -Ltarget/release \
 *      -lkiln_runtime -Wl,-rpath,$PWD/target/release -o run_model
 *
 * Part of Kiln, licensed under the Apache License, Version 2.0.
 */
#include <kiln/c_api.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors --------------------------------------------------------------- */

/* Prints `what` and the error the last failed call raised, then exits 1. */
static void die_ffi(const char* what) {
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err != NULL) {
    /* An Error object's cell (kind, message, ...) follows its 24-byte header. */
    const TVMFFIErrorCell* cell = (const TVMFFIErrorCell*)((char*)err + sizeof(TVMFFIObject));
    fprintf(stderr, "run_model: %s: %.*s: %.*s\n", what, (int)cell->kind.size, cell->kind.data,
            (int)cell->message.size, cell->message.data);
    TVMFFIObjectDecRef(err);
  } else {
    fprintf(stderr, "run_model: %s failed\n", what);
  }
  exit(1);
}

/* Prints a printf-style message and exits 1. */
static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "run_model: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

/* ---- calling functions ------------------------------------------------------ */

static TVMFFIAny none(void) {
  TVMFFIAny v;
  memset(&v, 0, sizeof(v));
  v.type_index = kTVMFFINone;
  return v;
}

static TVMFFIAny raw_str(const char* s) {
  TVMFFIAny v = none();
  v.type_index = kTVMFFIRawStr;
  v.v_c_str = s;
  return v;
}

static TVMFFIAny object(TVMFFIObjectHandle h) {
  TVMFFIAny v = none();
  v.type_index = ((TVMFFIObject*)h)->type_index;
  v.v_obj = (TVMFFIObject*)h;
  return v;
}

/* Calls `f` with `n` borrowed arguments; exits with the error on failure. The
 * result is owned by the caller (release objects with TVMFFIObjectDecRef). */
static TVMFFIAny call(TVMFFIObjectHandle f, TVMFFIAny* args, int n, const char* what) {
  TVMFFIAny out = none();
  if (TVMFFIFunctionCall(f, args, n, &out) != 0) die_ffi(what);
  return out;
}

/* The global function `name` (owned). */
static TVMFFIObjectHandle global(const char* name) {
  TVMFFIByteArray b = {name, strlen(name)};
  TVMFFIObjectHandle f = NULL;
  if (TVMFFIFunctionGetGlobal(&b, &f) != 0) die_ffi(name);
  if (f == NULL) die("the runtime has no global function %s", name);
  return f;
}

/* The function `name` of module `mod` (owned), searching its imports too. */
static TVMFFIObjectHandle module_function(TVMFFIObjectHandle get_function, TVMFFIObjectHandle mod,
                                          const char* name) {
  TVMFFIAny args[3] = {object(mod), raw_str(name), none()};
  args[2].type_index = kTVMFFIBool;
  args[2].v_int64 = 1;
  TVMFFIAny f = call(get_function, args, 3, name);
  if (f.type_index != kTVMFFIFunction) die("the module has no function %s", name);
  return f.v_obj;
}

/* ---- .npy files ------------------------------------------------------------ */

/* The dtypes this program reads and writes, with their NumPy descr. */
static const struct {
  const char* descr;
  DLDataType dtype;
} kDtypes[] = {
    {"<f4", {kDLFloat, 32, 1}}, {"<f8", {kDLFloat, 64, 1}}, {"<f2", {kDLFloat, 16, 1}},
    {"<i8", {kDLInt, 64, 1}},   {"<i4", {kDLInt, 32, 1}},   {"|i1", {kDLInt, 8, 1}},
    {"|u1", {kDLUInt, 8, 1}},   {"|b1", {kDLBool, 8, 1}},
};
#define N_DTYPES (sizeof(kDtypes) / sizeof(kDtypes[0]))
#define MAX_NDIM 16

/* An array read from a .npy file: `data` is malloc'ed, `t` points into this. */
typedef struct {
  void* data;
  int64_t shape[MAX_NDIM];
  DLTensor t;
} Array;

/* The text after `'key':` in a header dict, or NULL. */
static const char* dict_value(const char* header, const char* key) {
  char pat[64];
  snprintf(pat, sizeof(pat), "'%s':", key);
  const char* at = strstr(header, pat);
  if (at == NULL) return NULL;
  at += strlen(pat);
  while (*at == ' ') at++;
  return at;
}

/* Reads `path` (format 1.0, 2.0 or 3.0; little-endian, C order, a dtype of
 * kDtypes) into `a`; exits with a message naming the file on anything else. */
static void read_npy(const char* path, Array* a) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) die("cannot open %s: %s", path, strerror(errno));
  unsigned char pre[12];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0)
    die("%s is not a .npy file (no \\x93NUMPY magic)", path);
  size_t header_len;
  if (pre[6] == 1) {
    header_len = (size_t)pre[8] | ((size_t)pre[9] << 8);
  } else if (pre[6] == 2 || pre[6] == 3) {
    if (fread(pre + 10, 1, 2, f) != 2) die("%s: the header length is truncated", path);
    header_len = (size_t)pre[8] | ((size_t)pre[9] << 8) | ((size_t)pre[10] << 16) |
                 ((size_t)pre[11] << 24);
  } else {
    die("%s: unsupported .npy format version", path);
  }
  if (header_len > (1u << 20)) die("%s: the header is implausibly long", path);
  char* header = malloc(header_len + 1);
  if (header == NULL || fread(header, 1, header_len, f) != header_len)
    die("%s: the header is truncated", path);
  header[header_len] = '\0';

  /* descr */
  const char* d = dict_value(header, "descr");
  if (d == NULL || *d != '\'') die("%s: the header has no dtype descr: %s", path, header);
  size_t k;
  for (k = 0; k < N_DTYPES; k++) {
    size_t n = strlen(kDtypes[k].descr);
    if (strncmp(d + 1, kDtypes[k].descr, n) == 0 && d[1 + n] == '\'') break;
  }
  if (k == N_DTYPES)
    die("%s: unsupported dtype (need <f4, <f8, <f2, <i8, <i4, |i1, |u1 or |b1): %s", path, header);
  a->t.dtype = kDtypes[k].dtype;

  /* fortran_order */
  const char* fo = dict_value(header, "fortran_order");
  if (fo == NULL || strncmp(fo, "False", 5) != 0)
    die("%s: only C-order arrays are supported: %s", path, header);

  /* shape: "(2, 3)", "(5,)" or "()" */
  const char* s = dict_value(header, "shape");
  if (s == NULL || *s != '(') die("%s: the header has no shape tuple: %s", path, header);
  s++;
  int ndim = 0;
  size_t numel = 1;
  for (;;) {
    while (*s == ' ' || *s == ',') s++;
    if (*s == ')') break;
    char* end;
    errno = 0;
    long long dim = strtoll(s, &end, 10);
    if (end == s || errno != 0 || dim < 0 || ndim == MAX_NDIM)
      die("%s: bad shape in header: %s", path, header);
    a->shape[ndim++] = dim;
    if (dim != 0 && numel > SIZE_MAX / (size_t)dim) die("%s: the shape is too large", path);
    numel *= (size_t)dim;
    s = end;
  }
  free(header);

  /* body: exactly numel elements */
  size_t elem = (size_t)(a->t.dtype.bits / 8);
  if (numel > SIZE_MAX / elem) die("%s: the shape is too large", path);
  size_t nbytes = numel * elem;
  a->data = malloc(nbytes ? nbytes : 1);
  if (a->data == NULL) die("%s: out of memory", path);
  if (fread(a->data, 1, nbytes, f) != nbytes)
    die("%s: the file is shorter than its shape and dtype say", path);
  if (fgetc(f) != EOF) die("%s: the file is longer than its shape and dtype say", path);
  fclose(f);

  a->t.data = a->data;
  a->t.device.device_type = kDLCPU;
  a->t.device.device_id = 0;
  a->t.ndim = ndim;
  a->t.shape = a->shape;
  a->t.strides = NULL; /* compact, row-major */
  a->t.byte_offset = 0;
}

/* Writes the CPU tensor `t` to `path`, with `kiln run`'s header layout. */
static void write_npy(const char* path, const DLTensor* t) {
  const char* descr = NULL;
  for (size_t k = 0; k < N_DTYPES; k++) {
    const DLDataType* d = &kDtypes[k].dtype;
    if (d->code == t->dtype.code && d->bits == t->dtype.bits && d->lanes == t->dtype.lanes)
      descr = kDtypes[k].descr;
  }
  if (descr == NULL) die("%s: the output's dtype has no .npy descr here", path);
  if (t->device.device_type != kDLCPU) die("%s: the output is not on the CPU", path);
  size_t numel = 1;
  for (int i = 0; i < t->ndim; i++) numel *= (size_t)t->shape[i];
  if (t->strides != NULL) { /* a compact tensor may carry explicit strides */
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
      if (t->shape[i] != 1 && t->strides[i] != expect)
        die("%s: the output is not compact", path);
      expect *= t->shape[i];
    }
  }

  char header[512];
  int n = snprintf(header, sizeof(header), "{'descr': '%s', 'fortran_order': False, 'shape': (",
                   descr);
  for (int i = 0; i < t->ndim; i++)
    n += snprintf(header + n, sizeof(header) - (size_t)n, "%s%lld", i ? ", " : "",
                  (long long)t->shape[i]);
  n += snprintf(header + n, sizeof(header) - (size_t)n, "%s), }", t->ndim == 1 ? "," : "");
  /* magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64. */
  while ((10 + n + 1) % 64 != 0) header[n++] = ' ';
  header[n++] = '\n';

  FILE* f = fopen(path, "wb");
  if (f == NULL) die("cannot write %s: %s", path, strerror(errno));
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff),
                           (unsigned char)(n >> 8)};
  size_t nbytes = numel * (size_t)(t->dtype.bits / 8);
  const char* data = (const char*)t->data + t->byte_offset;
  if (fwrite(pre, 1, 10, f) != 10 || fwrite(header, 1, (size_t)n, f) != (size_t)n ||
      fwrite(data, 1, nbytes, f) != nbytes || fclose(f) != 0)
    die("cannot write %s: %s", path, strerror(errno));
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char** argv) {
  const char* library = NULL;
  const char* out_dir = ".";
  const char* inputs[64];
  int n_inputs = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (library == NULL) {
      library = argv[i];
    } else if (strchr(argv[i], '=') != NULL && n_inputs < 64) {
      inputs[n_inputs++] = argv[i];
    } else {
      library = NULL;
      break;
    }
  }
  if (library == NULL) {
    fprintf(stderr, "usage: %s LIBRARY [NAME=FILE.npy ...] [-o OUT_DIR]\n", argv[0]);
    return 2;
  }

  /* 1. Load the library: a module whose root is the graph executor factory. */
  TVMFFIObjectHandle load = global("ffi.ModuleLoadFromFile");
  TVMFFIObjectHandle get_function = global("ffi.ModuleGetFunction");
  TVMFFIAny path = raw_str(library);
  TVMFFIAny lib = call(load, &path, 1, "loading the library");

  /* 2. lib["default"](cpu(0)) makes a graph executor module. */
  TVMFFIObjectHandle create = module_function(get_function, lib.v_obj, "default");
  TVMFFIAny dev = none();
  dev.type_index = kTVMFFIDevice;
  dev.v_device.device_type = kDLCPU;
  dev.v_device.device_id = 0;
  TVMFFIAny exec = call(create, &dev, 1, "default(cpu(0))");
  if (exec.type_index != kTVMFFIModule) die("default(cpu(0)) did not return a module");

  TVMFFIObjectHandle set_input = module_function(get_function, exec.v_obj, "set_input");
  TVMFFIObjectHandle run = module_function(get_function, exec.v_obj, "run");
  TVMFFIObjectHandle get_output = module_function(get_function, exec.v_obj, "get_output");
  TVMFFIObjectHandle get_num_outputs =
      module_function(get_function, exec.v_obj, "get_num_outputs");

  /* 3. Inputs: set_input(name, DLTensor*) copies the array into the executor. */
  for (int i = 0; i < n_inputs; i++) {
    char name[256];
    const char* eq = strchr(inputs[i], '=');
    size_t len = (size_t)(eq - inputs[i]);
    if (len == 0 || len >= sizeof(name)) die("bad input %s (expected NAME=FILE.npy)", inputs[i]);
    memcpy(name, inputs[i], len);
    name[len] = '\0';
    Array a;
    read_npy(eq + 1, &a);
    TVMFFIAny args[2] = {raw_str(name), none()};
    args[1].type_index = kTVMFFIDLTensorPtr;
    args[1].v_ptr = &a.t;
    char what[300];
    snprintf(what, sizeof(what), "set_input(%s)", name);
    call(set_input, args, 2, what);
    free(a.data);
  }

  /* 4. Run. */
  call(run, NULL, 0, "run");

  /* 5. Outputs: get_output(k) returns the executor's tensor (owned reference). */
  TVMFFIAny n = call(get_num_outputs, NULL, 0, "get_num_outputs");
  for (int64_t k = 0; k < n.v_int64; k++) {
    TVMFFIAny idx = none();
    idx.type_index = kTVMFFIInt;
    idx.v_int64 = k;
    TVMFFIAny out = call(get_output, &idx, 1, "get_output");
    if (out.type_index != kTVMFFITensor) die("get_output did not return a tensor");
    /* A Tensor object's DLTensor follows its 24-byte header. */
    const DLTensor* t = (const DLTensor*)((char*)out.v_obj + sizeof(TVMFFIObject));
    char file[4096];
    snprintf(file, sizeof(file), "%s/output_%lld.npy", out_dir, (long long)k);
    write_npy(file, t);
    printf("%s: ndim %d, first value ", file, t->ndim);
    if (t->dtype.code == kDLFloat && t->dtype.bits == 32)
      printf("%g\n", (double)*(const float*)((const char*)t->data + t->byte_offset));
    else
      printf("(not float32)\n");
    TVMFFIObjectDecRef(out.v_obj);
  }

  TVMFFIObjectDecRef(set_input);
  TVMFFIObjectDecRef(run);
  TVMFFIObjectDecRef(get_output);
  TVMFFIObjectDecRef(get_num_outputs);
  TVMFFIObjectDecRef(create);
  TVMFFIObjectDecRef(exec.v_obj);
  TVMFFIObjectDecRef(lib.v_obj);
  TVMFFIObjectDecRef(get_function);
  TVMFFIObjectDecRef(load);
  return 0;
}
