/*
 * kiln._fastcall: the compiled call path of the Python binding.
 *
 * `CallBase` is a base class without instance data; `kiln.Function` derives from it (beside
 * `kiln.ObjectBase`) and so gets its `tp_call` from here: the arguments that are plain values
 * (int, float, bool, None) or FFI objects passed as themselves are written as TVMFFIAny views
 * on the C stack, the function is called through the loaded library's `TVMFFIFunctionCall`
 * with the GIL released, and plain results become Python values here; objects are handed to the
 * binding's factories. Every other argument (strings, arrays, lists, callables...) or result
 * kind takes the binding's ctypes path, which knows every conversion: the two paths give the
 * same results, this one is only faster.
 *
 * Python callables passed where a function is expected become FFI functions whose trampolines
 * (`make_callback`) are compiled too: plain arguments and results are converted here, the rest
 * by the binding's readers and writers.
 *
 * Nothing here links against a Kiln library: `configure` receives the address of
 * `TVMFFIFunctionCall` from the library the package loaded (Kiln's or TVM-FFI's), and the
 * Python pieces it calls back into (the fallback call, the error raiser, the object
 * factories).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* TVMFFIAny as the C ABI lays it out: a type index, 4 bytes of padding (small string length),
 * and an 8-byte payload. */
typedef struct {
  int32_t type_index;
  uint32_t pad;
  union {
    int64_t v_int64;
    double v_float64;
    void *v_ptr;
  };
} FFIAny;

typedef int (*FunctionCallFn)(void *func, const FFIAny *args, int32_t num_args, FFIAny *result);
typedef int (*SafeCallFn)(void *self, const FFIAny *args, int32_t num_args, FFIAny *result);
typedef void (*DeleterFn)(void *self);
typedef int (*FunctionCreateFn)(void *self, SafeCallFn safe_call, DeleterFn deleter, void **out);

enum { K_NONE = 0, K_INT = 1, K_BOOL = 2, K_FLOAT = 3, K_OBJECT_BEGIN = 64, MAX_FAST_ARGS = 16 };

/* What `configure` was given. */
static FunctionCallFn g_call = NULL;
static Py_ssize_t g_handle_offset = -1;     /* ObjectBase._handle slot */
static Py_ssize_t g_type_index_offset = -1; /* ObjectBase._type_index slot */
static PyObject *g_fallback = NULL;         /* core.call_method(self, *args) */
static PyObject *g_raise = NULL;            /* error.raise_last_error(rc) */
static PyObject *g_read_pod = NULL;         /* core.read_owned_parts(tidx, pad, payload) */
static PyObject *g_factories = NULL;        /* core.OBJECT_FACTORIES */
static PyObject *g_default_factory = NULL;  /* core._FACTORY (a one-item list) */
static PyObject *g_writers = NULL;          /* core.WRITERS */
static PyObject *g_w_object = NULL;         /* core._w_object */
/* Callbacks (Python callables as FFI functions), set by configure_callbacks. */
static FunctionCreateFn g_create = NULL;
static PyObject *g_callbacks = NULL;   /* core._CALLBACKS: key -> callable */
static PyObject *g_read_view = NULL;   /* core.read_view_parts(tidx, pad, payload) */
static PyObject *g_write_owned = NULL; /* core.write_owned(address, value) */
static PyObject *g_set_raised = NULL;  /* error.set_raised_from_exception(exc) */

/* The offset of a __slots__ member, read from its member descriptor. */
static Py_ssize_t slot_offset(PyObject *descr, const char *what) {
  if (!descr || Py_TYPE(descr) != &PyMemberDescr_Type) {
    PyErr_Format(PyExc_TypeError, "configure: %s must be a __slots__ member descriptor", what);
    return -1;
  }
  PyMemberDef *def = ((PyMemberDescrObject *)descr)->d_member;
  if (def->type != T_OBJECT_EX && def->type != T_OBJECT) {
    PyErr_Format(PyExc_TypeError, "configure: %s is not an object slot", what);
    return -1;
  }
  return def->offset;
}

static PyObject *configure(PyObject *mod, PyObject *args) {
  unsigned long long call_addr;
  PyObject *handle_descr, *tidx_descr, *fallback, *raise, *read_pod, *factories, *dflt, *writers,
      *w_object;
  if (!PyArg_ParseTuple(args, "KOOOOOOOOO", &call_addr, &handle_descr, &tidx_descr, &fallback,
                        &raise, &read_pod, &factories, &dflt, &writers, &w_object))
    return NULL;
  if (!call_addr) {
    PyErr_SetString(PyExc_ValueError, "configure: TVMFFIFunctionCall address is 0");
    return NULL;
  }
  if (!PyDict_Check(factories) || !PyDict_Check(writers) || !PyList_Check(dflt) ||
      PyList_GET_SIZE(dflt) != 1) {
    PyErr_SetString(PyExc_TypeError, "configure: factories and writers must be dicts, the "
                                     "default factory a one-item list");
    return NULL;
  }
  Py_ssize_t ho = slot_offset(handle_descr, "_handle");
  Py_ssize_t to = slot_offset(tidx_descr, "_type_index");
  if (ho < 0 || to < 0)
    return NULL;
  g_call = (FunctionCallFn)(uintptr_t)call_addr;
  g_handle_offset = ho;
  g_type_index_offset = to;
#define KEEP(dst, src) \
  do {                 \
    Py_XDECREF(dst);   \
    Py_INCREF(src);    \
    dst = src;         \
  } while (0)
  KEEP(g_fallback, fallback);
  KEEP(g_raise, raise);
  KEEP(g_read_pod, read_pod);
  KEEP(g_factories, factories);
  KEEP(g_default_factory, dflt);
  KEEP(g_writers, writers);
  KEEP(g_w_object, w_object);
#undef KEEP
  Py_RETURN_NONE;
}

static inline PyObject *slot_at(PyObject *obj, Py_ssize_t offset) {
  return *(PyObject **)((char *)obj + offset);
}

/* Writes a plain value (an int that fits 64 bits, a float, None, a bool) into `out`; 0 for
 * anything else. Arguments and callback results share it. */
static int write_plain(PyObject *v, FFIAny *out) {
  PyTypeObject *t = Py_TYPE(v);
  out->pad = 0;
  if (t == &PyLong_Type) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow)
      return 0;
    out->type_index = K_INT;
    out->v_int64 = x;
    return 1;
  }
  if (t == &PyFloat_Type) {
    out->type_index = K_FLOAT;
    out->v_float64 = PyFloat_AS_DOUBLE(v);
    return 1;
  }
  if (v == Py_None) {
    out->type_index = K_NONE;
    out->v_int64 = 0;
    return 1;
  }
  if (t == &PyBool_Type) {
    out->type_index = K_BOOL;
    out->v_int64 = v == Py_True;
    return 1;
  }
  return 0;
}

/* A plain value (None, int, bool, float) as Python, or NULL with no error set for any other
 * kind. Results and callback arguments share it. */
static PyObject *read_plain(const FFIAny *a) {
  switch (a->type_index) {
  case K_NONE:
    Py_RETURN_NONE;
  case K_INT:
    return PyLong_FromLongLong(a->v_int64);
  case K_BOOL:
    return PyBool_FromLong(a->v_int64 != 0);
  case K_FLOAT:
    return PyFloat_FromDouble(a->v_float64);
  default:
    return NULL;
  }
}

static int is_plain(int32_t type_index) {
  return type_index == K_NONE || type_index == K_INT || type_index == K_BOOL ||
         type_index == K_FLOAT;
}

/* Writes `arg` as a view into `out`; 0 when this path does not handle its kind. */
static int write_arg(PyObject *arg, FFIAny *out) {
  if (write_plain(arg, out))
    return 1;
  PyTypeObject *t = Py_TYPE(arg);
  /* An object passed as itself: its class writes it with core._w_object. */
  PyObject *writer = PyDict_GetItem(g_writers, (PyObject *)t); /* borrowed */
  if (writer != g_w_object)
    return 0;
  PyObject *h = slot_at(arg, g_handle_offset);
  PyObject *ti = slot_at(arg, g_type_index_offset);
  if (!h || !ti || !PyLong_Check(h) || !PyLong_Check(ti))
    return 0; /* released or half-made: the ctypes path raises the right error */
  void *handle = PyLong_AsVoidPtr(h);
  long tidx = PyLong_AsLong(ti);
  if (!handle || PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  out->type_index = (int32_t)tidx;
  out->pad = 0;
  out->v_ptr = handle;
  return 1;
}

static PyObject *call_fallback(PyObject *self, PyObject *args) {
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  PyObject *full = PyTuple_New(n + 1);
  if (!full)
    return NULL;
  Py_INCREF(self);
  PyTuple_SET_ITEM(full, 0, self);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *a = PyTuple_GET_ITEM(args, i);
    Py_INCREF(a);
    PyTuple_SET_ITEM(full, i + 1, a);
  }
  PyObject *r = PyObject_Call(g_fallback, full, NULL);
  Py_DECREF(full);
  return r;
}

/* The owned result as a Python value (takes its reference). */
static PyObject *read_result(FFIAny *r) {
  if (is_plain(r->type_index))
    return read_plain(r);
  if (r->type_index >= K_OBJECT_BEGIN) {
    PyObject *tidx = PyLong_FromLong(r->type_index);
    PyObject *handle = PyLong_FromVoidPtr(r->v_ptr);
    if (!tidx || !handle) {
      Py_XDECREF(tidx);
      Py_XDECREF(handle);
      return NULL;
    }
    PyObject *factory = PyDict_GetItem(g_factories, tidx); /* borrowed */
    if (!factory)
      factory = PyList_GET_ITEM(g_default_factory, 0);
    PyObject *out = PyObject_CallFunctionObjArgs(factory, handle, tidx, NULL);
    Py_DECREF(tidx);
    Py_DECREF(handle);
    return out;
  }
  return PyObject_CallFunction(g_read_pod, "iIL", (int)r->type_index, (unsigned)r->pad,
                               (long long)r->v_int64);
}

static PyObject *callbase_call(PyObject *self, PyObject *args, PyObject *kwargs) {
  if (kwargs && PyDict_GET_SIZE(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "FFI functions take positional arguments only");
    return NULL;
  }
  if (!g_call) {
    PyErr_SetString(PyExc_RuntimeError, "kiln._fastcall is not configured");
    return NULL;
  }
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n > MAX_FAST_ARGS)
    return call_fallback(self, args);
  PyObject *h = slot_at(self, g_handle_offset);
  if (!h || !PyLong_Check(h))
    return call_fallback(self, args); /* released: the ctypes path reports it */
  void *func = PyLong_AsVoidPtr(h);
  FFIAny slots[MAX_FAST_ARGS + 1];
  for (Py_ssize_t i = 0; i < n; i++) {
    if (!write_arg(PyTuple_GET_ITEM(args, i), &slots[i]))
      return call_fallback(self, args);
  }
  FFIAny *result = &slots[n];
  result->type_index = K_NONE;
  result->pad = 0;
  result->v_int64 = 0;
  int rc;
  /* The arguments are views: the tuple keeps every object alive across the call. */
  Py_BEGIN_ALLOW_THREADS
  rc = g_call(func, slots, (int32_t)n, result);
  Py_END_ALLOW_THREADS
  if (rc != 0) {
    PyObject *r = PyObject_CallFunction(g_raise, "i", rc);
    Py_XDECREF(r);
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_RuntimeError, "FFI call failed with code %d", rc);
    return NULL;
  }
  return read_result(result);
}


/* ---- Python callables as FFI functions ----------------------------------------------------
 * The function's `self` is a key of core._CALLBACKS (which keeps the callable alive until the
 * runtime calls the deleter), as on the ctypes path; only the trampolines are compiled. */

static PyObject *view_to_python(const FFIAny *a) {
  if (is_plain(a->type_index))
    return read_plain(a);
  return PyObject_CallFunction(g_read_view, "iIL", (int)a->type_index, (unsigned)a->pad,
                               (long long)a->v_int64);
}

/* Writes the Python value `ret` as the owned result; -1 with a Python error set on failure. */
static int python_to_result(PyObject *ret, FFIAny *result) {
  if (write_plain(ret, result))
    return 0;
  PyObject *addr = PyLong_FromVoidPtr(result);
  if (!addr)
    return -1;
  PyObject *r = PyObject_CallFunctionObjArgs(g_write_owned, addr, ret, NULL);
  Py_DECREF(addr);
  if (!r)
    return -1;
  Py_DECREF(r);
  return 0;
}

/* Turns the pending Python exception into the FFI error of this thread. */
static void raise_into_ffi(void) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb && value)
    PyException_SetTraceback(value, tb);
  PyObject *r = PyObject_CallFunctionObjArgs(g_set_raised, value ? value : Py_None, NULL);
  Py_XDECREF(r);
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
}

static int callback_safe_call(void *self, const FFIAny *args, int32_t num_args, FFIAny *result) {
  PyGILState_STATE gil = PyGILState_Ensure();
  int rc = -1;
  PyObject *key = PyLong_FromVoidPtr(self);
  PyObject *func = key ? PyDict_GetItemWithError(g_callbacks, key) : NULL; /* borrowed */
  Py_XDECREF(key);
  if (!func) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_RuntimeError, "the Python function of this callback is gone");
    goto fail;
  }
  Py_INCREF(func);
  PyObject *tuple = PyTuple_New(num_args);
  if (!tuple) {
    Py_DECREF(func);
    goto fail;
  }
  for (int32_t i = 0; i < num_args; i++) {
    PyObject *v = view_to_python(&args[i]);
    if (!v) {
      Py_DECREF(tuple);
      Py_DECREF(func);
      goto fail;
    }
    PyTuple_SET_ITEM(tuple, i, v);
  }
  PyObject *ret = PyObject_Call(func, tuple, NULL);
  Py_DECREF(tuple);
  Py_DECREF(func);
  if (!ret)
    goto fail;
  rc = python_to_result(ret, result);
  Py_DECREF(ret);
  if (rc == 0)
    goto done;
fail:
  raise_into_ffi();
  rc = -1;
done:
  PyGILState_Release(gil);
  return rc;
}

static void callback_deleter(void *self) {
  if (!Py_IsInitialized())
    return; /* released at exit, after the interpreter */
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject *key = PyLong_FromVoidPtr(self);
  if (key && g_callbacks && PyDict_DelItem(g_callbacks, key) < 0)
    PyErr_Clear();
  Py_XDECREF(key);
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
  PyGILState_Release(gil);
}

static PyObject *configure_callbacks(PyObject *mod, PyObject *args) {
  unsigned long long create_addr;
  PyObject *callbacks, *read_view, *write_owned, *set_raised;
  if (!PyArg_ParseTuple(args, "KO!OOO", &create_addr, &PyDict_Type, &callbacks, &read_view,
                        &write_owned, &set_raised))
    return NULL;
  if (!create_addr) {
    PyErr_SetString(PyExc_ValueError, "configure_callbacks: TVMFFIFunctionCreate address is 0");
    return NULL;
  }
  g_create = (FunctionCreateFn)(uintptr_t)create_addr;
  Py_XDECREF(g_callbacks);
  Py_XDECREF(g_read_view);
  Py_XDECREF(g_write_owned);
  Py_XDECREF(g_set_raised);
  Py_INCREF(callbacks);
  Py_INCREF(read_view);
  Py_INCREF(write_owned);
  Py_INCREF(set_raised);
  g_callbacks = callbacks;
  g_read_view = read_view;
  g_write_owned = write_owned;
  g_set_raised = set_raised;
  Py_RETURN_NONE;
}

/* make_callback(key) -> owned handle of an FFI function calling core._CALLBACKS[key]. */
static PyObject *make_callback(PyObject *mod, PyObject *arg) {
  if (!g_create) {
    PyErr_SetString(PyExc_RuntimeError, "kiln._fastcall callbacks are not configured");
    return NULL;
  }
  void *key = PyLong_AsVoidPtr(arg);
  if (!key && PyErr_Occurred())
    return NULL;
  void *out = NULL;
  int rc = g_create(key, callback_safe_call, callback_deleter, &out);
  if (rc != 0) {
    PyObject *r = PyObject_CallFunction(g_raise, "i", rc);
    Py_XDECREF(r);
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_RuntimeError, "TVMFFIFunctionCreate failed with code %d", rc);
    return NULL;
  }
  return PyLong_FromVoidPtr(out);
}

static PyTypeObject CallBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._fastcall.CallBase",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Base of kiln.Function: calls through the compiled path.",
    .tp_call = callbase_call,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(call_addr, handle_slot, type_index_slot, fallback, raise_last_error, read_pod, "
     "factories, default_factory, writers, w_object): connect to the loaded library and the "
     "binding's Python pieces."},
    {"configure_callbacks", configure_callbacks, METH_VARARGS,
     "configure_callbacks(create_addr, callbacks, read_view, write_owned, set_raised): connect "
     "the compiled callback trampolines."},
    {"make_callback", make_callback, METH_O,
     "make_callback(key) -> owned handle of an FFI function calling core._CALLBACKS[key]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_fastcall", "The compiled call path of kiln.Function.", -1, methods,
};

PyMODINIT_FUNC PyInit__fastcall(void) {
  if (PyType_Ready(&CallBaseType) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&moduledef);
  if (!m)
    return NULL;
  Py_INCREF(&CallBaseType);
  if (PyModule_AddObject(m, "CallBase", (PyObject *)&CallBaseType) < 0) {
    Py_DECREF(&CallBaseType);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
