/* local.c: the "local" transport (transport.h): the daemon's own validation (core/prepare.c) and
 * CPU backend (backends/cpu) in the caller's process, so a user without a daemon gets the same
 * functions, the same messages and the same bits. Outputs are computed straight into the caller's
 * memory where the backend can write it (64-byte aligned, overlapping no input), else aside and
 * copied. A call runs to its end: the deadline does not cut it. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "optable_json.h"
#include "prepare.h"
#include "transport.h"

typedef struct {
  segops_transport base;
  segops_backend *be;
  segops_limits lim;
} local_t;

/* The daemon's message for a refused call, verbatim, under the table's code. */
static int daemon_err(segops_error *e, int code, const char *msg) {
  if (!e) return code;
  e->code = code;
  e->http_status = segops_err_status(code);
  snprintf(e->name, sizeof e->name, "%s", segops_err_name(code));
  snprintf(e->message, sizeof e->message, "%s", msg);
  e->retry_after_s = 0;
  return code;
}

static void add_arg(segops_request *req, const char *name, const segops_array *a, size_t nbytes) {
  segops_named_tensor *nt = &req->args[req->nargs++];
  nt->name = name;
  nt->name_len = strlen(name);
  nt->t.dtype = a->dtype;
  nt->t.ndim = a->ndim;
  memcpy(nt->t.shape, a->shape, sizeof nt->t.shape);
  nt->t.data = a->data;
  nt->t.nbytes = nbytes;
}

/* The request a codec would have decoded from this call's body. */
static void make_request(const segops_tcall *tc, segops_request *req) {
  memset(req, 0, sizeof *req);
  req->op = (segops_op)(tc->fn / SEGOPS_PASS_COUNT);
  req->pass = (segops_pass)(tc->fn % SEGOPS_PASS_COUNT);
  for (int k = 0; k < tc->n_in; k++)
    if (tc->in[k]) add_arg(req, tc->in_name[k], tc->in[k], tc->in_nbytes[k]);
  if (tc->idx) add_arg(req, "idx", tc->idx, tc->idx_nbytes);
  req->ns_kind = SEGOPS_NS_INT;
  req->ns_value = tc->num_segments;
  req->outputs_placed = true; /* into the caller's memory (place_outputs), no block of prepare's */
  if (tc->want == (1u << tc->n_out) - 1) return;
  req->has_outputs = true;
  for (int o = 0; o < tc->n_out; o++) {
    if (!((tc->want >> o) & 1u)) continue;
    req->outputs[req->n_outputs].name = tc->out_name[o];
    req->outputs[req->n_outputs++].len = strlen(tc->out_name[o]);
  }
}

static bool overlaps(const void *a, size_t an, const void *b, size_t bn) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return an && bn && x < y + bn && y < x + an;
}

/* Whether the backend may write output memory p of n bytes in place. */
static bool writable_in_place(const segops_tcall *tc, const void *p, size_t n) {
  if ((uintptr_t)p % 64) return false;
  if (tc->idx && overlaps(p, n, tc->idx->data, tc->idx_nbytes)) return false;
  for (int k = 0; k < tc->n_in; k++)
    if (tc->in[k] && overlaps(p, n, tc->in[k]->data, tc->in_nbytes[k])) return false;
  return true;
}

/* Points the prepared call's outputs at the caller's memory where the backend may write it
 * (allocating what the caller left NULL), else at aside[o], copied to the caller's afterwards. */
static int place_outputs(const segops_tcall *tc, segops_prepared *p, void *aside[], bool made[], segops_error *e) {
  for (int o = 0; o < tc->n_out; o++) {
    segops_array *a = tc->out[o];
    if (!a) continue;
    size_t n = p->out_nbytes[o];
    if (a->data && a->nbytes < n)
      return segops_client_err(e, SEGOPS_E_INVALID_ARGUMENT, "%s %s: %s needs %zu bytes but %s.nbytes is %zu", tc->op,
                               tc->pass, tc->out_name[o], n, tc->out_name[o], a->nbytes);
    if (!a->data) {
      a->data = segops_client_alloc(NULL, n);
      if (!a->data)
        return segops_client_err(e, SEGOPS_E_NOMEM, "%s %s: out of memory for %s (%zu bytes)", tc->op, tc->pass,
                                 tc->out_name[o], n);
      made[o] = true;
    }
    if (!made[o] && !writable_in_place(tc, a->data, n) && !(aside[o] = segops_aligned_alloc(n)))
      return segops_client_err(e, SEGOPS_E_NOMEM, "%s %s: out of memory for %s (%zu bytes)", tc->op, tc->pass,
                               tc->out_name[o], n);
    p->call.out[o] = aside[o] ? aside[o] : a->data;
  }
  return SEGOPS_OK;
}

static int local_call(segops_transport *t, const segops_tcall *tc, double deadline, segops_error *e) {
  (void)deadline;
  local_t *lt = (local_t *)t;
  segops_request req;
  make_request(tc, &req);
  segops_prepared p;
  char err[512];
  int rc = segops_prepare(&req, &lt->lim, &p, err, sizeof err);
  if (rc) return daemon_err(e, rc, err);
  void *aside[SEGOPS_MAX_OUTPUTS] = {0};
  bool made[SEGOPS_MAX_OUTPUTS] = {false};
  rc = place_outputs(tc, &p, aside, made, e);
  if (!rc) {
    rc = lt->be->run(lt->be->ctx, 0, &p.call, err, sizeof err);
    if (rc) daemon_err(e, rc, err);
  }
  for (int o = 0; o < tc->n_out; o++) {
    segops_array *a = tc->out[o];
    if (!a) continue;
    if (rc && made[o]) {
      free(a->data);
      a->data = NULL;
    }
    if (rc) {
      free(aside[o]);
      continue;
    }
    if (aside[o] && p.out_nbytes[o]) memcpy(a->data, aside[o], p.out_nbytes[o]);
    free(aside[o]);
    a->dtype = p.call.dtype;
    a->ndim = p.out_ndim[o];
    memcpy(a->shape, p.out_shape[o], sizeof a->shape);
    a->nbytes = p.out_nbytes[o];
  }
  segops_prepared_free(&p);
  return rc;
}

/* ---- /v1/info for the in-process backend ---- */

static int local_info(segops_transport *t, char **json, double deadline, segops_error *e) {
  (void)deadline;
  local_t *lt = (local_t *)t;
  segops_device_info di;
  memset(&di, 0, sizeof di);
  lt->be->device_info(lt->be->ctx, 0, &di);
  di.name[sizeof di.name - 1] = 0;
  json_t *root =
      json_pack("{s:s, s:s, s:s, s:s, s:[{s:i, s:s, s:I, s:I, s:i}], s:[], s:{s:I, s:I}, s:b, s:o}", "version",
                SEGOPS_VERSION, "api", "v1", "backend", lt->be->name, "transport", "local", "devices", "index", 0,
                "name", di.name, "memory_total", (json_int_t)di.memory_total, "memory_used", (json_int_t)di.memory_used,
                "workers", lt->be->n_devices, "listeners", "limits", "max_elements", (json_int_t)lt->lim.max_elements,
                "max_segments", (json_int_t)lt->lim.max_segments, "auth", 0, "ops", segops_optable_json(false));
  *json = root ? json_dumps(root, JSON_COMPACT) : NULL;
  json_decref(root);
  return *json ? SEGOPS_OK : segops_client_err(e, SEGOPS_E_NOMEM, "info: out of memory");
}

static void local_close(segops_transport *t) {
  local_t *lt = (local_t *)t;
  if (!lt) return;
  segops_backend_free(lt->be);
  free(lt);
}

/* No forget: a forked child has none of the backend's threads to join, so it leaves the parent's
 * backend allocated and makes its own. */
static const segops_transport_vt LOCAL_VT = {"local", local_call, local_info, local_close, NULL};

segops_transport *segops_local_open(int threads, segops_error *e) {
  local_t *lt = calloc(1, sizeof *lt);
  if (!lt || !(lt->be = segops_cpu_backend_new(threads))) {
    free(lt);
    segops_client_err(e, SEGOPS_E_NOMEM, "local: the CPU backend could not start (%d threads)", threads);
    return NULL;
  }
  /* The caller's own process and memory: no limit protects anyone else, so only the backend's own
   * bounds hold (idx is int32 in the backend: segments fit in it). */
  lt->lim.max_elements = INT64_MAX / 64;
  lt->lim.max_segments = INT32_MAX;
  lt->lim.max_output_bytes = 0;
  lt->base.vt = &LOCAL_VT;
  return &lt->base;
}
