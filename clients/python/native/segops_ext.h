/* segops_ext.h: inside segops._native, the CPython extension of the segops package on libsegops
 * (clients/c/include/segops.h): what its files share. module.c (the module, the hooks the Python
 * package gives it), client.c (the Client type), inputs.c (Python objects -> segops_array),
 * outputs.c (libsegops' memory -> numpy arrays and torch tensors). Written for the stable ABI
 * (Py_LIMITED_API 3.11 where the build asks for it); single-phase init, state in globals. */
#ifndef SEGOPS_EXT_H
#define SEGOPS_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "segops.h"

/* ---- a libsegops client shared by the Python Client and the memory it handed out -------------
 * refs: one for the Python Client until it is closed, one per call in flight, one per block of
 * memory (an array, a tensor) still alive. The last one closes the libsegops client, so memory
 * from segops_alloc is always freed before segops_close, from whichever thread drops it (a torch
 * tensor may die on autograd's threads, without the GIL: nothing here touches Python). */
typedef struct {
  segops_client *c;
  atomic_long refs;
} sx_core;

void sx_core_get(sx_core *k);
void sx_core_put(sx_core *k); /* accepts NULL */

/* ---- hooks the Python package sets (module.c; borrowed references kept in globals) ---------- */
typedef struct {
  PyObject *error;                      /* error(code, http_status, name, message, retry_after) -> exception instance */
  PyObject *coerce;                     /* coerce(obj, name, where) -> a C-contiguous little-endian array of a sendable
                                           dtype, or raises (numpy's conversions, the client's refusals) */
  PyObject *asarray;                    /* numpy.asarray: a Block -> an ndarray viewing it */
  PyObject *tensor;                     /* torch.Tensor, once segops.torch is imported (else NULL) */
  PyObject *dtypes[SEGOPS_DTYPE_COUNT]; /* torch.float32, float64, int32, int64 */
  PyObject *from_dlpack;                /* torch.utils.dlpack.from_dlpack */
} sx_hooks;
extern sx_hooks sx_hook;

/* Interned attribute names (module.c). */
extern PyObject *sx_str_data_ptr, *sx_str_dtype, *sx_str_shape, *sx_str_is_contiguous, *sx_str_contiguous,
    *sx_str_is_cpu;

/* Raises the exception the package's error hook makes for e (code, status, name, message). */
void sx_raise(const segops_error *e);
/* Raises a client-side error of code with a message that starts "segops: " (as libsegops' own). */
void sx_raise_client(int code, const char *fmt, ...);

/* ---- inputs (inputs.c) ----------------------------------------------------------------------- */

/* One argument as libsegops takes it, and what keeps its memory alive until sx_input_release. */
typedef struct {
  segops_array a;
  bool present;
  bool has_view;
  Py_buffer view;
  PyObject *keep; /* a converted object (a contiguous copy), owned */
} sx_input;

/* o (None: omitted) as an argument named name of function where ("segmented_sum forward").
 * 0, or -1 with an exception set; 1 when o is a torch tensor off the CPU (nothing set: the caller
 * hands the call back to Python, which moves it). */
int sx_input_from(PyObject *o, const char *name, const char *where, sx_input *in);
void sx_input_release(sx_input *in);
/* num_segments: a Python integer (or an object with __index__). 0 or -1 with an exception set. */
int sx_num_segments(PyObject *o, const char *where, int64_t *out);

/* ---- outputs (outputs.c) --------------------------------------------------------------------- */

/* Memory of k (segops_alloc's, or an output libsegops allocated) as a numpy array or a torch
 * tensor of a's dtype and shape; steals the memory (freed with the last view of it) and takes a
 * core reference for it. NULL with an exception set: the memory is freed then. */
PyObject *sx_wrap_numpy(sx_core *k, const segops_array *a);
PyObject *sx_wrap_torch(sx_core *k, const segops_array *a);

extern PyType_Spec sx_block_spec;
extern PyObject *sx_block_type;

/* ---- the Client type (client.c) -------------------------------------------------------------- */
extern PyType_Spec sx_client_spec;

#endif
