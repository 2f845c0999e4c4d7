/* outputs.c: libsegops' memory handed to Python without a copy. An output (or segops_alloc's
 * memory, Client.empty) becomes a numpy array through a Block, a buffer object that frees the
 * memory when the last view of it dies; or a torch tensor through a DLPack capsule whose deleter
 * frees it when the tensor's storage dies (on any thread: no Python there). Either way the memory
 * stays in the client's shared pools on the native channel, so an output sent back as the next
 * call's input travels without a copy. */
#include <stdlib.h>
#include <string.h>

#include "dlpack_abi.h"
#include "segops_ext.h"

static const char *const FORMATS[SEGOPS_DTYPE_COUNT] = {"f", "d", "i", "q"};
static const int ITEMSIZE[SEGOPS_DTYPE_COUNT] = {4, 8, 4, 8};

/* ---- Block: memory as a buffer with dtype and shape ------------------------------------------- */

typedef struct {
  PyObject_HEAD sx_core *core;
  void *p;
  segops_dtype dtype;
  int ndim;
  Py_ssize_t nbytes;
  Py_ssize_t shape[SEGOPS_MAX_NDIM];
  Py_ssize_t strides[SEGOPS_MAX_NDIM];
} sx_block;

PyObject *sx_block_type;

static int block_getbuffer(PyObject *self, Py_buffer *view, int flags) {
  sx_block *b = (sx_block *)self;
  memset(view, 0, sizeof *view);
  view->buf = b->p;
  view->obj = Py_NewRef(self);
  view->len = b->nbytes;
  view->readonly = 0;
  view->itemsize = ITEMSIZE[b->dtype];
  view->format = (flags & PyBUF_FORMAT) ? (char *)FORMATS[b->dtype] : NULL;
  if ((flags & PyBUF_ND) == PyBUF_ND) {
    view->ndim = b->ndim;
    view->shape = b->shape;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? b->strides : NULL;
  } else {
    /* A consumer that asks for no shape reads plain bytes. */
    view->ndim = 1;
    view->itemsize = 1;
    view->format = (flags & PyBUF_FORMAT) ? "B" : NULL;
  }
  return 0;
}

static void block_dealloc(PyObject *self) {
  sx_block *b = (sx_block *)self;
  PyTypeObject *tp = Py_TYPE(self);
  if (b->core) {
    segops_free(b->core->c, b->p);
    sx_core_put(b->core);
  }
  freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  tp_free(self);
  Py_DECREF(tp);
}

static PyObject *block_nbytes(PyObject *self, void *closure) {
  (void)closure;
  return PyLong_FromSsize_t(((sx_block *)self)->nbytes);
}

static PyGetSetDef block_getset[] = {{"nbytes", block_nbytes, NULL, "bytes of the block", NULL}, {NULL}};

static PyType_Slot block_slots[] = {
    {Py_tp_dealloc, block_dealloc},
    {Py_bf_getbuffer, block_getbuffer},
    {Py_tp_getset, block_getset},
    {Py_tp_doc,
     "Memory of a segops client (shared with its daemon on the native channel), freed when the last "
     "array viewing it is gone. Made by the client; not constructible from Python."},
    {0, NULL}};

PyType_Spec sx_block_spec = {"segops._native.Block", sizeof(sx_block), 0, Py_TPFLAGS_DEFAULT, block_slots};

static sx_block *block_new(sx_core *k, const segops_array *a) {
  PyTypeObject *tp = (PyTypeObject *)sx_block_type;
  allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
  sx_block *b = (sx_block *)alloc(tp, 0);
  if (!b) return NULL;
  b->p = a->data;
  b->dtype = a->dtype;
  b->ndim = a->ndim;
  b->nbytes = (Py_ssize_t)a->nbytes;
  Py_ssize_t stride = ITEMSIZE[a->dtype];
  for (int d = a->ndim - 1; d >= 0; d--) {
    b->shape[d] = (Py_ssize_t)a->shape[d];
    b->strides[d] = stride;
    stride *= b->shape[d] ? b->shape[d] : 1;
  }
  sx_core_get(k);
  b->core = k;
  return b;
}

PyObject *sx_wrap_numpy(sx_core *k, const segops_array *a) {
  sx_block *b = block_new(k, a);
  if (!b) {
    segops_free(k->c, a->data);
    return NULL;
  }
  PyObject *arr = PyObject_CallFunctionObjArgs(sx_hook.asarray, (PyObject *)b, NULL);
  Py_DECREF(b); /* the array's view holds it */
  return arr;
}

/* ---- DLPack: memory as a torch tensor --------------------------------------------------------- */

typedef struct {
  sx_dl_managed m;
  int64_t shape[SEGOPS_MAX_NDIM];
  sx_core *core;
} sx_dl;

static const sx_dl_dtype DL_DTYPES[SEGOPS_DTYPE_COUNT] = {
    {SX_DL_FLOAT, 32, 1}, {SX_DL_FLOAT, 64, 1}, {SX_DL_INT, 32, 1}, {SX_DL_INT, 64, 1}};

/* The consumer is done (the tensor's storage died), or the capsule was never consumed. */
static void dl_deleter(sx_dl_managed *m) {
  sx_dl *d = (sx_dl *)m;
  segops_free(d->core->c, m->dl_tensor.data);
  sx_core_put(d->core);
  free(d);
}

static void capsule_destructor(PyObject *cap) {
  if (!PyCapsule_IsValid(cap, "dltensor")) return; /* consumed: renamed "used_dltensor" */
  sx_dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
  if (m) m->deleter(m);
}

PyObject *sx_wrap_torch(sx_core *k, const segops_array *a) {
  if (!sx_hook.from_dlpack) {
    segops_free(k->c, a->data);
    PyErr_SetString(PyExc_RuntimeError, "segops: torch outputs asked for before segops.torch set its hooks");
    return NULL;
  }
  sx_dl *d = calloc(1, sizeof *d);
  if (!d) {
    segops_free(k->c, a->data);
    return PyErr_NoMemory();
  }
  for (int i = 0; i < a->ndim; i++) d->shape[i] = a->shape[i];
  d->m.dl_tensor.data = a->data;
  d->m.dl_tensor.device.device_type = SX_DL_CPU;
  d->m.dl_tensor.ndim = a->ndim;
  d->m.dl_tensor.dtype = DL_DTYPES[a->dtype];
  d->m.dl_tensor.shape = d->shape;
  d->m.deleter = dl_deleter;
  d->m.manager_ctx = d;
  sx_core_get(k);
  d->core = k;
  PyObject *cap = PyCapsule_New(&d->m, "dltensor", capsule_destructor);
  if (!cap) {
    dl_deleter(&d->m);
    return NULL;
  }
  PyObject *t = PyObject_CallFunctionObjArgs(sx_hook.from_dlpack, cap, NULL);
  Py_DECREF(cap); /* consumed: the tensor owns d; not consumed: the destructor frees it */
  return t;
}
