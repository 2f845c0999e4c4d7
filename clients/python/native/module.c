/* module.c: the module segops._native: its types (Client, Block), the function table's lookups,
 * and the hooks the Python package gives it at import (how errors are made, numpy's conversions,
 * torch's tensor type and DLPack import), so that the C code depends on neither numpy nor torch at
 * build time. */
#include <stdarg.h>
#include <stdio.h>

#include "segops_ext.h"

sx_hooks sx_hook;

/* *slot = v (a new reference), dropping what was there. */
static void set_ref(PyObject **slot, PyObject *v) {
  PyObject *old = *slot;
  Py_INCREF(v);
  *slot = v;
  Py_XDECREF(old);
}
PyObject *sx_str_data_ptr, *sx_str_dtype, *sx_str_shape, *sx_str_is_contiguous, *sx_str_contiguous, *sx_str_is_cpu;

void sx_raise(const segops_error *e) {
  if (!sx_hook.error) {
    PyErr_Format(PyExc_RuntimeError, "%s (%s)", e->message, e->name);
    return;
  }
  PyObject *exc =
      PyObject_CallFunction(sx_hook.error, "iissd", e->code, e->http_status, e->name, e->message, e->retry_after_s);
  if (!exc) return;
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
}

void sx_raise_client(int code, const char *fmt, ...) {
  segops_error e;
  e.code = code;
  e.http_status = segops_err_status(code);
  e.retry_after_s = 0;
  snprintf(e.name, sizeof e.name, "%s", segops_err_name(code));
  int n = snprintf(e.message, sizeof e.message, "segops: ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e.message + n, sizeof e.message - (size_t)n, fmt, ap);
  va_end(ap);
  sx_raise(&e);
}

/* configure(error, coerce, asarray): the package's hooks (module state for the process). */
static PyObject *configure(PyObject *mod, PyObject *args) {
  (void)mod;
  PyObject *error, *coerce, *asarray;
  if (!PyArg_ParseTuple(args, "OOO:configure", &error, &coerce, &asarray)) return NULL;
  set_ref(&sx_hook.error, error);
  set_ref(&sx_hook.coerce, coerce);
  set_ref(&sx_hook.asarray, asarray);
  Py_RETURN_NONE;
}

/* set_torch(Tensor, (float32, float64, int32, int64), from_dlpack): segops.torch's hooks. */
static PyObject *set_torch(PyObject *mod, PyObject *args) {
  (void)mod;
  PyObject *tensor, *dtypes, *from_dlpack;
  if (!PyArg_ParseTuple(args, "OOO:set_torch", &tensor, &dtypes, &from_dlpack)) return NULL;
  if (!PyTuple_Check(dtypes) || PyTuple_Size(dtypes) != SEGOPS_DTYPE_COUNT) {
    PyErr_SetString(PyExc_TypeError, "segops: set_torch: dtypes must be a tuple of 4 torch dtypes");
    return NULL;
  }
  for (int k = 0; k < SEGOPS_DTYPE_COUNT; k++) set_ref(&sx_hook.dtypes[k], PyTuple_GetItem(dtypes, k));
  set_ref(&sx_hook.tensor, tensor);
  set_ref(&sx_hook.from_dlpack, from_dlpack);
  Py_RETURN_NONE;
}

/* fn_table() -> ((op, pass, (input names), (output names)), ...) indexed by function id. */
static PyObject *fn_table(PyObject *mod, PyObject *unused) {
  (void)mod, (void)unused;
  PyObject *rows = PyTuple_New(SEGOPS_FN_COUNT);
  for (int fn = 0; rows && fn < SEGOPS_FN_COUNT; fn++) {
    int n_in = segops_fn_inputs(fn), n_out = segops_fn_outputs(fn);
    PyObject *ins = PyTuple_New(n_in), *outs = PyTuple_New(n_out);
    for (int k = 0; ins && k < n_in; k++) PyTuple_SetItem(ins, k, PyUnicode_FromString(segops_fn_input_name(fn, k)));
    for (int k = 0; outs && k < n_out; k++)
      PyTuple_SetItem(outs, k, PyUnicode_FromString(segops_fn_output_name(fn, k)));
    PyObject *row = ins && outs ? Py_BuildValue("(ssOO)", segops_fn_op(fn), segops_fn_pass(fn), ins, outs) : NULL;
    Py_XDECREF(ins);
    Py_XDECREF(outs);
    if (!row || PyErr_Occurred()) {
      Py_XDECREF(row);
      Py_CLEAR(rows);
      break;
    }
    PyTuple_SetItem(rows, fn, row);
  }
  return rows;
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS, "configure(error, coerce, asarray): the package's hooks"},
    {"set_torch", set_torch, METH_VARARGS, "set_torch(Tensor, dtypes, from_dlpack): segops.torch's hooks"},
    {"fn_table", fn_table, METH_NOARGS, "the functions of libsegops, by id: (op, pass, inputs, outputs)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "segops._native",
    "libsegops (the C client of segopsd) for the segops package: every transport, calls without copies.",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL};

static int add_type(PyObject *m, PyType_Spec *spec, const char *name, PyObject **out) {
  PyObject *tp = PyType_FromSpec(spec);
  if (!tp) return -1;
  if (out) *out = Py_NewRef(tp);
  int rc = PyModule_AddObject(m, name, tp);
  if (rc) Py_DECREF(tp);
  return rc;
}

static int intern_names(void) {
  struct {
    PyObject **slot;
    const char *s;
  } names[] = {{&sx_str_data_ptr, "data_ptr"},     {&sx_str_dtype, "dtype"},
               {&sx_str_shape, "shape"},           {&sx_str_is_contiguous, "is_contiguous"},
               {&sx_str_contiguous, "contiguous"}, {&sx_str_is_cpu, "is_cpu"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!(*names[i].slot = PyUnicode_InternFromString(names[i].s))) return -1;
  return 0;
}

PyMODINIT_FUNC PyInit__native(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  if (intern_names() || add_type(m, &sx_client_spec, "Client", NULL) ||
      add_type(m, &sx_block_spec, "Block", &sx_block_type) ||
      PyModule_AddIntConstant(m, "ABI_VERSION", SEGOPS_ABI_VERSION) ||
      PyModule_AddIntConstant(m, "FN_COUNT", SEGOPS_FN_COUNT)) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
