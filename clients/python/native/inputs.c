/* inputs.c: the arguments of a call as libsegops takes them (segops_array: dtype, shape, pointer),
 * read straight from the caller's memory: torch tensors through their own accessors (no detour
 * through numpy), anything else with the buffer protocol (numpy arrays). What is not a
 * C-contiguous little-endian array of a sendable dtype goes through the package's coerce hook
 * (numpy's conversions: lists, strided or big-endian arrays; the client's refusals). The
 * extension validates nothing the daemon validates: it refuses only what it cannot send. */
#include <string.h>

#include "segops_ext.h"

/* A buffer's struct format as a segops dtype: float32, float64, int32 or int64 in this machine's
 * byte order; -1 for anything else (then the coerce hook converts or refuses it). */
static int dtype_of_format(const char *fmt, Py_ssize_t itemsize) {
  if (!fmt) return -1;
  if (*fmt == '@' || *fmt == '=' || *fmt == '<') fmt++;
  if (!fmt[0] || fmt[1]) return -1;
  switch (fmt[0]) {
    case 'f':
      return itemsize == 4 ? SEGOPS_F32 : -1;
    case 'd':
      return itemsize == 8 ? SEGOPS_F64 : -1;
    case 'i':
    case 'l':
    case 'q':
      return itemsize == 4 ? SEGOPS_I32 : itemsize == 8 ? SEGOPS_I64 : -1;
    default:
      return -1;
  }
}

static int too_many_dims(const char *name, const char *where, Py_ssize_t ndim) {
  sx_raise_client(SEGOPS_E_INVALID_ARGUMENT, "%s: %s has %zd dimensions; at most %d can be sent", where, name, ndim,
                  SEGOPS_MAX_NDIM);
  return -1;
}

/* o through the buffer protocol: 0 when it is a C-contiguous array of a sendable dtype, 1 when
 * it is something else (nothing held, no exception), -1 on an error other than that. */
static int buffer_input(PyObject *o, const char *name, const char *where, sx_input *in) {
  if (!PyObject_CheckBuffer(o)) return 1;
  if (PyObject_GetBuffer(o, &in->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
    if (!PyErr_ExceptionMatches(PyExc_BufferError) && !PyErr_ExceptionMatches(PyExc_ValueError)) return -1;
    PyErr_Clear(); /* not C-contiguous: numpy makes it so */
    return 1;
  }
  int dt = dtype_of_format(in->view.format, in->view.itemsize);
  if (dt < 0) {
    PyBuffer_Release(&in->view);
    return 1;
  }
  if (in->view.ndim > SEGOPS_MAX_NDIM) {
    PyBuffer_Release(&in->view);
    return too_many_dims(name, where, in->view.ndim);
  }
  in->has_view = true;
  in->a.dtype = (segops_dtype)dt;
  in->a.ndim = in->view.ndim;
  for (int d = 0; d < in->view.ndim; d++) in->a.shape[d] = in->view.shape[d];
  in->a.data = in->view.buf;
  return 0;
}

static int call_bool(PyObject *o, PyObject *method) {
  PyObject *r = PyObject_CallMethodObjArgs(o, method, NULL);
  if (!r) return -1;
  int v = PyObject_IsTrue(r);
  Py_DECREF(r);
  return v;
}

static int attr_bool(PyObject *o, PyObject *attr) {
  PyObject *r = PyObject_GetAttr(o, attr);
  if (!r) return -1;
  int v = PyObject_IsTrue(r);
  Py_DECREF(r);
  return v;
}

/* The tensor's dtype as a segops dtype, or -1 (not one of the four). */
static int tensor_dtype(PyObject *t) {
  PyObject *dt = PyObject_GetAttr(t, sx_str_dtype);
  if (!dt) return -2;
  int found = -1;
  for (int k = 0; k < SEGOPS_DTYPE_COUNT; k++)
    if (dt == sx_hook.dtypes[k]) found = k;
  Py_DECREF(dt);
  return found;
}

/* A CPU torch tensor from its own accessors: data_ptr, dtype, shape, made contiguous when it is
 * not. 0, 1 (not on the CPU: nothing held), or -1 with an exception set. */
static int tensor_input(PyObject *t, const char *name, const char *where, sx_input *in) {
  int cpu = attr_bool(t, sx_str_is_cpu);
  if (cpu <= 0) return cpu < 0 ? -1 : 1;
  int dt = tensor_dtype(t);
  if (dt == -2) return -1;
  if (dt < 0) return 2; /* another dtype: the coerce hook says what is wrong */
  int contiguous = call_bool(t, sx_str_is_contiguous);
  if (contiguous < 0) return -1;
  if (!contiguous) {
    if (!(in->keep = PyObject_CallMethodObjArgs(t, sx_str_contiguous, NULL))) return -1;
    t = in->keep;
  }
  PyObject *shape = PyObject_GetAttr(t, sx_str_shape);
  if (!shape) return -1;
  Py_ssize_t ndim = PyTuple_Check(shape) ? PyTuple_Size(shape) : -1;
  if (ndim < 0 || ndim > SEGOPS_MAX_NDIM) {
    Py_DECREF(shape);
    if (ndim < 0) {
      PyErr_Format(PyExc_TypeError, "segops: %s: %s.shape is not a tuple", where, name);
      return -1;
    }
    return too_many_dims(name, where, ndim);
  }
  for (Py_ssize_t d = 0; d < ndim; d++) in->a.shape[d] = PyLong_AsLongLong(PyTuple_GetItem(shape, d));
  Py_DECREF(shape);
  PyObject *ptr = PyObject_CallMethodObjArgs(t, sx_str_data_ptr, NULL);
  if (!ptr) return -1;
  in->a.data = PyLong_AsVoidPtr(ptr);
  Py_DECREF(ptr);
  if (PyErr_Occurred()) return -1;
  in->a.dtype = (segops_dtype)dt;
  in->a.ndim = (int)ndim;
  return 0;
}

/* o converted by the package's coerce hook, then read as a buffer. */
static int coerced_input(PyObject *o, const char *name, const char *where, sx_input *in) {
  PyObject *conv = PyObject_CallFunction(sx_hook.coerce, "Oss", o, name, where);
  if (!conv) return -1;
  Py_XDECREF(in->keep);
  in->keep = conv;
  int rc = buffer_input(conv, name, where, in);
  if (rc == 1)
    PyErr_Format(PyExc_TypeError, "segops: %s: %s: the converted argument is no C-contiguous sendable array", where,
                 name);
  return rc == 0 ? 0 : -1;
}

int sx_input_from(PyObject *o, const char *name, const char *where, sx_input *in) {
  memset(in, 0, sizeof *in);
  if (o == Py_None) return 0;
  in->present = true;
  int rc = 1;
  if (sx_hook.tensor && PyObject_IsInstance(o, sx_hook.tensor) == 1) {
    rc = tensor_input(o, name, where, in);
    if (rc == 1) return 1; /* off the CPU: Python moves it */
  } else {
    rc = buffer_input(o, name, where, in);
  }
  if (rc == 0 || rc == -1) return rc;
  return coerced_input(o, name, where, in);
}

void sx_input_release(sx_input *in) {
  if (in->has_view) PyBuffer_Release(&in->view);
  in->has_view = false;
  Py_CLEAR(in->keep);
}

int sx_num_segments(PyObject *o, const char *where, int64_t *out) {
  if (PyFloat_Check(o)) {
    sx_raise_client(SEGOPS_E_INVALID_ARGUMENT, "%s: num_segments must be an integer, not a float (%.17g)", where,
                    PyFloat_AsDouble(o));
    return -1;
  }
  PyObject *i = PyLong_Check(o) ? (Py_INCREF(o), o) : PyNumber_Index(o);
  if (!i) {
    PyErr_Clear();
    PyObject *tname = PyObject_GetAttrString((PyObject *)Py_TYPE(o), "__name__");
    PyErr_Format(PyExc_TypeError, "segops: %s: num_segments of type %S cannot be sent (an integer is)", where,
                 tname ? tname : Py_None);
    Py_XDECREF(tname);
    return -1;
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
  Py_DECREF(i);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (overflow) {
    sx_raise_client(SEGOPS_E_INVALID_ARGUMENT, "%s: num_segments does not fit in 64 bits", where);
    return -1;
  }
  *out = (int64_t)v;
  return 0;
}
