/* client.c: segops._native.Client, one libsegops client (segops_open) for segops.Client: calls
 * with numpy or torch outputs, memory in the client's shared pools, /v1/info and the transport in
 * use. The GIL is released around everything that waits on a daemon, so threads sharing a client
 * keep several calls in flight (libsegops' calls are thread-safe). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "segops_ext.h"

typedef struct {
  PyObject_HEAD sx_core *core; /* NULL once closed */
} sx_client;

void sx_core_get(sx_core *k) { atomic_fetch_add_explicit(&k->refs, 1, memory_order_relaxed); }

void sx_core_put(sx_core *k) {
  if (!k || atomic_fetch_sub_explicit(&k->refs, 1, memory_order_acq_rel) != 1) return;
  segops_close(k->c);
  free(k);
}

/* The client of a call, with a reference for the call's duration; NULL with an exception when it
 * is closed. */
static sx_core *use(sx_client *self) {
  if (!self->core) {
    PyErr_SetString(PyExc_ValueError, "segops: the client is closed");
    return NULL;
  }
  sx_core_get(self->core);
  return self->core;
}

/* ---- construction ---------------------------------------------------------------------------- */

/* libsegops' messages for a person go to the `segops` logger (the library never writes to stderr). */
static void log_to_python(void *user, int level, const char *message) {
  (void)user;
  if (!Py_IsInitialized()) return;
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject *logging = PyImport_ImportModule("logging");
  PyObject *logger = logging ? PyObject_CallMethod(logging, "getLogger", "s", "segops") : NULL;
  PyObject *r = logger ? PyObject_CallMethod(logger, "log", "is", level, message) : NULL;
  if (!r) PyErr_Clear(); /* a log line that cannot be written is not the call's failure */
  Py_XDECREF(r);
  Py_XDECREF(logger);
  Py_XDECREF(logging);
  PyGILState_Release(g);
}

static int client_init(PyObject *op, PyObject *args, PyObject *kw) {
  sx_client *self = (sx_client *)op;
  static char *names[] = {"url", "token", "timeout", "transport", "spin_us", "threads", "wait", NULL};
  const char *url = NULL, *token = NULL, *transport = NULL;
  double timeout = 60.0, wait = 0;
  int spin_us = -1, threads = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|zzdziid:Client", names, &url, &token, &timeout, &transport, &spin_us,
                                   &threads, &wait))
    return -1;
  if (self->core) {
    PyErr_SetString(PyExc_RuntimeError, "segops: Client.__init__ called twice");
    return -1;
  }
  segops_options o;
  segops_options_init(&o);
  o.token = token;
  o.timeout_s = timeout;
  o.transport = transport;
  o.spin_us = spin_us;
  o.threads = threads;
  o.wait_s = wait;
  o.log = log_to_python;
  segops_client *c = NULL;
  segops_error e;
  if (segops_open(&c, url, &o, &e) != SEGOPS_OK) {
    sx_raise(&e);
    return -1;
  }
  sx_core *k = malloc(sizeof *k);
  if (!k) {
    segops_close(c);
    PyErr_NoMemory();
    return -1;
  }
  k->c = c;
  atomic_init(&k->refs, 1);
  self->core = k;
  return 0;
}

static void client_dealloc(PyObject *op) {
  sx_client *self = (sx_client *)op;
  PyTypeObject *tp = Py_TYPE(op);
  sx_core_put(self->core);
  self->core = NULL;
  freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  tp_free(op);
  Py_DECREF(tp);
}

static PyObject *client_close(PyObject *op, PyObject *unused) {
  (void)unused;
  sx_client *self = (sx_client *)op;
  sx_core *k = self->core;
  self->core = NULL;
  /* Memory still in use (arrays, tensors) keeps the libsegops client until it is freed. */
  if (k) {
    PyThreadState *ts = PyEval_SaveThread(); /* segops_close may join the backend's threads */
    sx_core_put(k);
    PyEval_RestoreThread(ts);
  }
  Py_RETURN_NONE;
}

/* ---- calls ------------------------------------------------------------------------------------ */

/* The names of every function, "segmented_sum forward", for messages. */
static char where_of[SEGOPS_FN_COUNT][64];

static const char *where(int fn) {
  if (!where_of[fn][0]) snprintf(where_of[fn], sizeof where_of[fn], "%s %s", segops_fn_op(fn), segops_fn_pass(fn));
  return where_of[fn];
}

/* want from an `outputs` list of names (None: every output); order[] gets the table index of each
 * name in the order asked, *n_order their count. */
static int want_of(int fn, PyObject *outputs, unsigned *want, int order[], int *n_order) {
  int n_out = segops_fn_outputs(fn);
  *want = 0;
  *n_order = 0;
  if (outputs == Py_None) {
    for (int k = 0; k < n_out; k++) order[k] = k;
    *want = (1u << n_out) - 1;
    *n_order = n_out;
    return 0;
  }
  PyObject *seq = PySequence_Fast(outputs, "segops: outputs must be a list of output names");
  if (!seq) return -1;
  Py_ssize_t n = PySequence_Size(seq);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *item = PySequence_GetItem(seq, i);
    const char *name = item ? PyUnicode_AsUTF8AndSize(item, NULL) : NULL;
    int found = -1;
    for (int k = 0; name && k < n_out; k++)
      if (!strcmp(name, segops_fn_output_name(fn, k))) found = k;
    Py_XDECREF(item);
    if (!name) {
      Py_DECREF(seq);
      return -1;
    }
    if (found < 0 || (*want >> found) & 1u || *n_order == SEGOPS_MAX_OUTPUTS) {
      sx_raise_client(SEGOPS_E_INVALID_ARGUMENT, "%s: %s output '%.64s'", where(fn),
                      found < 0 ? "there is no" : "asked twice for", name);
      Py_DECREF(seq);
      return -1;
    }
    *want |= 1u << found;
    order[(*n_order)++] = found;
  }
  Py_DECREF(seq);
  if (!*want) {
    sx_raise_client(SEGOPS_E_INVALID_ARGUMENT, "%s: outputs asks for no output", where(fn));
    return -1;
  }
  return 0;
}

typedef struct {
  int fn;
  int n_in;
  sx_input in[SEGOPS_MAX_INPUTS];
  sx_input idx;
  int64_t num_segments;
} call_args;

static void args_release(call_args *ca) {
  for (int k = 0; k < ca->n_in; k++) sx_input_release(&ca->in[k]);
  sx_input_release(&ca->idx);
}

/* fn, the inputs tuple, idx and num_segments of a call: 0, -1 with an exception set, or 1 when a
 * torch tensor is off the CPU (nothing held). */
static int parse_call(PyObject *const *args, call_args *ca) {
  memset(ca, 0, sizeof *ca);
  long fn = PyLong_AsLong(args[0]);
  if (fn == -1 && PyErr_Occurred()) return -1;
  if (fn < 0 || fn >= SEGOPS_FN_COUNT) {
    PyErr_Format(PyExc_ValueError, "segops: function %ld does not exist", fn);
    return -1;
  }
  ca->fn = (int)fn;
  PyObject *ins = args[1];
  int n_in = segops_fn_inputs(ca->fn);
  if (!PyTuple_Check(ins) || PyTuple_Size(ins) != n_in) {
    PyErr_Format(PyExc_TypeError, "segops: %s takes a tuple of %d inputs", where(ca->fn), n_in);
    return -1;
  }
  int rc = sx_num_segments(args[3], where(ca->fn), &ca->num_segments);
  for (int k = 0; k < n_in && rc == 0; k++, ca->n_in++)
    rc = sx_input_from(PyTuple_GetItem(ins, k), segops_fn_input_name(ca->fn, k), where(ca->fn), &ca->in[k]);
  if (rc == 0) rc = sx_input_from(args[2], "idx", where(ca->fn), &ca->idx);
  if (rc) args_release(ca);
  return rc;
}

/* Runs the call without the GIL; the outputs asked for (want) are allocated by libsegops. */
static int run(sx_core *k, call_args *ca, unsigned want, segops_array outs[]) {
  const segops_array *in[SEGOPS_MAX_INPUTS];
  for (int j = 0; j < ca->n_in; j++) in[j] = ca->in[j].present ? &ca->in[j].a : NULL;
  const segops_array *idx = ca->idx.present ? &ca->idx.a : NULL;
  segops_error e;
  PyThreadState *ts = PyEval_SaveThread();
  int rc = segops_run(k->c, ca->fn, in, idx, ca->num_segments, want, outs, &e);
  PyEval_RestoreThread(ts);
  if (rc != SEGOPS_OK) sx_raise(&e);
  return rc;
}

static void free_outputs(sx_core *k, segops_array outs[], int from) {
  for (int j = from; j < SEGOPS_MAX_OUTPUTS; j++)
    if (outs[j].data) segops_free(k->c, outs[j].data);
}

/* The outputs of a finished call as numpy arrays: one array, or a tuple in the order asked. Every
 * output's memory is given to an array or freed. */
static PyObject *numpy_result(sx_core *k, segops_array outs[], const int order[], int n_order) {
  PyObject *got[SEGOPS_MAX_OUTPUTS] = {NULL};
  for (int j = 0; j < SEGOPS_MAX_OUTPUTS; j++) {
    if (!outs[j].data) continue;
    if (!(got[j] = sx_wrap_numpy(k, &outs[j]))) {
      free_outputs(k, outs, j + 1);
      break;
    }
  }
  PyObject *res = NULL;
  if (!PyErr_Occurred() && n_order == 1) {
    res = got[order[0]];
    got[order[0]] = NULL;
  } else if (!PyErr_Occurred() && (res = PyTuple_New(n_order))) {
    for (int i = 0; i < n_order; i++) {
      PyTuple_SetItem(res, i, got[order[i]]);
      got[order[i]] = NULL;
    }
  }
  for (int j = 0; j < SEGOPS_MAX_OUTPUTS; j++) Py_XDECREF(got[j]);
  return res;
}

/* run(fn, inputs, idx, num_segments, outputs) -> the outputs as numpy arrays: one array, or a
 * tuple in the order asked (outputs: None for all of them in the table's order). */
static PyObject *client_run(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 5) {
    PyErr_SetString(PyExc_TypeError, "segops: run(fn, inputs, idx, num_segments, outputs)");
    return NULL;
  }
  sx_core *k = use((sx_client *)op);
  if (!k) return NULL;
  call_args ca;
  int rc = parse_call(args, &ca);
  if (rc == 1) PyErr_SetString(PyExc_TypeError, "segops: a torch tensor off the CPU: use segops.torch for it");
  if (rc) {
    sx_core_put(k);
    return NULL;
  }
  int order[SEGOPS_MAX_OUTPUTS], n_order = 0;
  unsigned want = 0;
  segops_array outs[SEGOPS_MAX_OUTPUTS];
  memset(outs, 0, sizeof outs);
  rc = want_of(ca.fn, args[4], &want, order, &n_order);
  if (!rc) rc = run(k, &ca, want, outs);
  args_release(&ca);
  PyObject *res = rc ? NULL : numpy_result(k, outs, order, n_order);
  sx_core_put(k);
  return res;
}

/* run_torch(fn, inputs, idx, num_segments, want) -> torch tensors viewing the client's memory:
 * one tensor, or a tuple in the table's order with None where want did not ask. NotImplemented
 * when a tensor is off the CPU (segops.torch then moves them to the host itself). */
static PyObject *client_run_torch(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 5) {
    PyErr_SetString(PyExc_TypeError, "segops: run_torch(fn, inputs, idx, num_segments, want)");
    return NULL;
  }
  sx_core *k = use((sx_client *)op);
  if (!k) return NULL;
  PyObject *res = NULL;
  call_args ca;
  int rc = parse_call(args, &ca);
  if (rc) {
    sx_core_put(k);
    return rc == 1 ? Py_NewRef(Py_NotImplemented) : NULL;
  }
  int n_out = segops_fn_outputs(ca.fn);
  unsigned long want = PyLong_AsUnsignedLong(args[4]);
  if (PyErr_Occurred() || want == 0 || want >> n_out) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_ValueError, "segops: %s: want 0x%lx is no set of outputs", where(ca.fn), want);
    args_release(&ca);
    sx_core_put(k);
    return NULL;
  }
  segops_array outs[SEGOPS_MAX_OUTPUTS];
  memset(outs, 0, sizeof outs);
  rc = run(k, &ca, (unsigned)want, outs);
  args_release(&ca);
  if (rc) {
    sx_core_put(k);
    return NULL;
  }
  if (n_out == 1) {
    res = sx_wrap_torch(k, &outs[0]);
  } else if ((res = PyTuple_New(n_out))) {
    for (int j = 0; j < n_out; j++) {
      PyObject *t = outs[j].data ? sx_wrap_torch(k, &outs[j]) : Py_NewRef(Py_None);
      if (!t) {
        free_outputs(k, outs, j + 1);
        Py_CLEAR(res);
        break;
      }
      PyTuple_SetItem(res, j, t);
    }
  } else {
    free_outputs(k, outs, 0);
  }
  sx_core_put(k);
  return res;
}

/* ---- memory, info, transport ------------------------------------------------------------------ */

/* empty(dtype, shape, torch) -> an uninitialised array (or tensor) in the client's memory. */
static PyObject *client_empty(PyObject *op, PyObject *args) {
  int dtype, as_torch;
  PyObject *shape;
  if (!PyArg_ParseTuple(args, "iOp:empty", &dtype, &shape, &as_torch)) return NULL;
  if (dtype < 0 || dtype >= SEGOPS_DTYPE_COUNT) return PyErr_Format(PyExc_ValueError, "segops: dtype %d", dtype);
  PyObject *seq = PySequence_Fast(shape, "segops: shape must be a sequence of integers");
  if (!seq) return NULL;
  Py_ssize_t nd = PySequence_Size(seq);
  segops_array a = {(segops_dtype)dtype, (int)nd, {0}, NULL, 0};
  size_t n = dtype == SEGOPS_F32 || dtype == SEGOPS_I32 ? 4 : 8;
  int bad = nd > SEGOPS_MAX_NDIM;
  for (Py_ssize_t d = 0; d < nd && !bad; d++) {
    PyObject *item = PySequence_GetItem(seq, d);
    a.shape[d] = item ? PyLong_AsLongLong(item) : -1;
    Py_XDECREF(item);
    bad = a.shape[d] < 0 || __builtin_mul_overflow(n, (size_t)a.shape[d], &n);
  }
  Py_DECREF(seq);
  if (PyErr_Occurred()) return NULL;
  if (bad)
    return PyErr_Format(PyExc_ValueError, "segops: empty: shape %R (at most %d dimensions, each >= 0)", shape,
                        SEGOPS_MAX_NDIM);
  sx_core *k = use((sx_client *)op);
  if (!k) return NULL;
  a.nbytes = n;
  PyThreadState *ts = PyEval_SaveThread();
  a.data = segops_alloc(k->c, n ? n : 1);
  PyEval_RestoreThread(ts);
  PyObject *res = NULL;
  if (!a.data)
    PyErr_Format(PyExc_MemoryError, "segops: no memory left for %zu bytes", n);
  else
    res = as_torch ? sx_wrap_torch(k, &a) : sx_wrap_numpy(k, &a);
  sx_core_put(k);
  return res;
}

/* info() -> /v1/info of the daemon the next call would go to, as JSON text. */
static PyObject *client_info(PyObject *op, PyObject *unused) {
  (void)unused;
  sx_core *k = use((sx_client *)op);
  if (!k) return NULL;
  char *json = NULL;
  segops_error e;
  PyThreadState *ts = PyEval_SaveThread();
  int rc = segops_info(k->c, &json, &e);
  PyEval_RestoreThread(ts);
  sx_core_put(k);
  if (rc != SEGOPS_OK) {
    sx_raise(&e);
    return NULL;
  }
  PyObject *s = PyUnicode_FromString(json);
  free(json);
  return s;
}

static PyObject *client_transport_used(PyObject *op, void *closure) {
  (void)closure;
  sx_client *self = (sx_client *)op;
  return PyUnicode_FromString(self->core ? segops_transport_used(self->core->c) : "");
}

static PyObject *client_closed(PyObject *op, void *closure) {
  (void)closure;
  return PyBool_FromLong(((sx_client *)op)->core == NULL);
}

static PyMethodDef client_methods[] = {
    {"run", (PyCFunction)(void (*)(void))client_run, METH_FASTCALL,
     "run(fn, inputs, idx, num_segments, outputs): outputs as numpy arrays"},
    {"run_torch", (PyCFunction)(void (*)(void))client_run_torch, METH_FASTCALL,
     "run_torch(fn, inputs, idx, num_segments, want): outputs as torch tensors"},
    {"empty", client_empty, METH_VARARGS, "empty(dtype, shape, torch): memory of this client"},
    {"info", client_info, METH_NOARGS, "info(): /v1/info as JSON text"},
    {"close", client_close, METH_NOARGS, "close(): no more calls; memory in use stays valid"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef client_getset[] = {
    {"transport_used", client_transport_used, NULL, "the last call's transport (\"\" before the first)", NULL},
    {"closed", client_closed, NULL, "whether close() was called", NULL},
    {NULL}};

static PyType_Slot client_slots[] = {{Py_tp_init, client_init},
                                     {Py_tp_new, PyType_GenericNew},
                                     {Py_tp_dealloc, client_dealloc},
                                     {Py_tp_methods, client_methods},
                                     {Py_tp_getset, client_getset},
                                     {Py_tp_doc,
                                      "Client(url=None, token=None, timeout=60.0, transport=None, "
                                      "spin_us=-1, threads=0, wait=0): a libsegops client (segops.h)."},
                                     {0, NULL}};

PyType_Spec sx_client_spec = {"segops._native.Client", sizeof(sx_client), 0, Py_TPFLAGS_DEFAULT, client_slots};
