/* shm_io.c: tensors by reference (see shm_io.h). */
#include "shm_io.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"

static bool eq(const char *a, size_t al, const char *b) { return strlen(b) == al && memcmp(a, b, al) == 0; }

/* A request that names regions from a peer without a known uid: refused as a whole. */
static int no_uid(const char *opn, char *err, size_t errlen) {
  return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                     "%s: shared memory is served only to clients on this host whose uid the kernel reports (a unix "
                     "socket, or TCP on a loopback address); send the tensors in the body",
                     opn);
}

int segops_shm_use_inputs(segops_shm *reg, int64_t uid, segops_request *req, segops_shm_use *u, char *err,
                          size_t errlen) {
  const char *opn = segops_op_name(req->op);
  for (int i = 0; i < req->nargs; i++) {
    segops_named_tensor *a = &req->args[i];
    if (!a->shm_region) continue;
    if (uid < 0) return no_uid(opn, err, errlen);
    /* The bytes it covers were counted by the record check (codec_record.h); a reference with a
     * negative dimension is left for prepare to refuse by value. */
    if (!a->shm_sized) continue;
    segops_shm_ref *ref = &u->in[u->n_in];
    char why[400];
    int rc = segops_shm_acquire(reg, uid, a->shm_region, a->shm_region_len, a->shm_offset, a->shm_bytes, ref, why,
                                sizeof why);
    /* An unknown region keeps its own code: the client registers it again and resends. */
    if (rc) return segops_errf(rc, err, errlen, "%s: %.*s: %s", opn, (int)a->name_len, a->name, why);
    u->n_in++;
    a->t.data = ref->ptr;
    a->t.nbytes = ref->len;
    a->t.shared = true;
  }
  return SEGOPS_OK;
}

/* Whether output place e may be computed in: 64-byte aligned as prepare's buffers are, and over
 * no byte of the object some input still has to be read from (compared on the object, not on
 * addresses: one object may be mapped under several names). */
static bool direct_ok(const segops_shm_out *e, const segops_shm_use *u) {
  if (((uintptr_t)e->ref.ptr & 63u) != 0) return false;
  for (int i = 0; i < u->n_in; i++)
    if (segops_shm_refs_overlap(&e->ref, &u->in[i])) return false;
  return true;
}

int segops_shm_use_outputs(segops_shm *reg, int64_t uid, const segops_request *req, segops_prepared *p,
                           segops_shm_use *u, char *err, size_t errlen) {
  const segops_fn_desc *fn = p->call.fn;
  const char *opn = segops_op_name(fn->op);
  if (req->n_outputs_shm && uid < 0) return no_uid(opn, err, errlen);
  for (int i = 0; i < req->n_outputs_shm; i++) {
    const segops_output_shm *o = &req->outputs_shm[i];
    int k = -1;
    for (int j = 0; j < fn->n_out; j++)
      if (eq(o->name, o->len, fn->out[j].name)) k = j;
    char nb[64];
    int nl = (int)(o->len < 48 ? o->len : 48);
    snprintf(nb, sizeof nb, "%.*s", nl, o->name);
    for (char *c = nb; *c; c++)
      if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f || *c == '\'' || *c == '"' || *c == '\\') *c = '?';
    if (k < 0) {
      char list[160] = "";
      for (int j = 0; j < fn->n_out; j++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "", fn->out[j].name);
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                         "%s: outputs_shm names '%s', which is not an output of %s (outputs: %s)", opn, nb,
                         segops_pass_name(fn->pass), list);
    }
    for (int m = 0; m < u->n_out; m++)
      if (u->out[m].k == k)
        return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "%s: outputs_shm names '%s' more than once", opn,
                           nb);
    if (!p->requested[k])
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                         "%s: outputs_shm names '%s', which \"outputs\" does not ask for", opn, nb);
    if (o->has_byte_size && o->byte_size < p->out_nbytes[k])
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                         "%s: %s: shared_memory_byte_size is %" PRIu64 " bytes, less than the output's %zu bytes", opn,
                         nb, o->byte_size, p->out_nbytes[k]);
    segops_shm_out *e = &u->out[u->n_out];
    char why[400];
    /* The place the client declared (OIP's shared_memory_byte_size) must lie in the region as a
     * whole, not only the part the output fills. */
    uint64_t place = o->has_byte_size && o->byte_size > p->out_nbytes[k] ? o->byte_size : p->out_nbytes[k];
    int rc = segops_shm_acquire(reg, uid, o->region, o->region_len, o->offset, place, &e->ref, why, sizeof why);
    if (rc) return segops_errf(rc, err, errlen, "%s: outputs_shm.%s: %s", opn, nb, why);
    e->k = k;
    e->offset = o->offset;
    snprintf(e->region, sizeof e->region, "%s", segops_shm_ref_name(&e->ref));
    u->n_out++;
    for (int m = 0; m < u->n_out - 1; m++)
      if (segops_shm_refs_overlap(&e->ref, &u->out[m].ref))
        return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                           "%s: outputs_shm: %s and %s overlap in shared memory", opn, fn->out[u->out[m].k].name,
                           fn->out[k].name);
    e->direct = direct_ok(e, u);
    if (e->direct && p->out_nbytes[k]) p->call.out[k] = e->ref.ptr;
  }
  return SEGOPS_OK;
}

int segops_shm_use_finish(segops_shm_use *u, const segops_prepared *p, char *err, size_t errlen) {
  for (int m = 0; m < u->n_out; m++) {
    int k = u->out[m].k;
    if (!u->out[m].direct && p->out_nbytes[k]) memcpy(u->out[m].ref.ptr, p->call.out[k], p->out_nbytes[k]);
  }
  for (int i = 0; i < u->n_in; i++)
    if (segops_shm_ref_damaged(&u->in[i], false, err, errlen)) return SEGOPS_E_INVALID_ARGUMENT;
  for (int m = 0; m < u->n_out; m++)
    if (segops_shm_ref_damaged(&u->out[m].ref, true, err, errlen)) return SEGOPS_E_INVALID_ARGUMENT;
  return SEGOPS_OK;
}

const char *segops_shm_use_output(const segops_shm_use *u, int k, uint64_t *offset) {
  for (int m = 0; m < u->n_out; m++)
    if (u->out[m].k == k) {
      *offset = u->out[m].offset;
      return u->out[m].region;
    }
  return NULL;
}

void segops_shm_use_release(segops_shm_use *u) {
  for (int i = 0; i < u->n_in; i++) segops_shm_release(&u->in[i]);
  for (int m = 0; m < u->n_out; m++) segops_shm_release(&u->out[m].ref);
  u->n_in = u->n_out = 0;
}
