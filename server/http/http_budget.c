/* http_budget.c: the one in-flight memory budget (--max-inflight-bytes) every request reserves
 * against, and its peer's share of it (--max-inflight-bytes-per-peer): its body as the bytes
 * arrive, then, before compute, everything else it will hold (decoded inputs, the idx copy,
 * outputs, the encoded answer). Over either a request gets 503 + Retry-After instead of the daemon
 * running out of memory, or one peer's unread answers holding everyone else's. */
#include "http.h"

bool segops_budget_take(segops_http_req *r, size_t *held, size_t bytes) {
  if (bytes == 0) return true;
  segops_server *srv = r->srv;
  int64_t after = atomic_fetch_add(&srv->body_bytes, (int64_t)bytes) + (int64_t)bytes;
  bool whole = after <= srv->cfg->max_inflight_bytes;
  /* Then the peer's share: one peer holding unread answers cannot starve the others. */
  if (whole && segops_peer_slot_take(r->cn ? r->cn->slot : NULL, bytes, srv->cfg->max_inflight_bytes_per_peer)) {
    *held += bytes;
    return true;
  }
  atomic_fetch_sub(&srv->body_bytes, (int64_t)bytes);
  r->over_peer_share = whole;
  return false;
}

bool segops_budget_room(segops_server *srv, size_t bytes) {
  return atomic_load(&srv->body_bytes) + (int64_t)bytes <= srv->cfg->max_inflight_bytes;
}

void segops_budget_release(segops_http_req *r, size_t *held) {
  if (*held) {
    atomic_fetch_sub(&r->srv->body_bytes, (int64_t)*held);
    segops_peer_slot_give(r->cn ? r->cn->slot : NULL, *held);
  }
  *held = 0;
}

const char *segops_budget_refusal(const segops_http_req *r) {
  return r->over_peer_share
             ? "this client holds its whole share of request memory (--max-inflight-bytes-per-peer); retry later"
             : "the server holds too much request memory (--max-inflight-bytes); retry later";
}

/* Bytes a JSON number takes when encoded: 17 significant digits, sign, exponent, separator. */
#define JSON_BYTES_PER_NUMBER 25

size_t segops_budget_work_bytes(const segops_http_req *r) {
  const segops_prepared *p = &r->prep;
  const segops_fn_desc *fn = p->call.fn;
  size_t need = 0;
  /* The JSON decoders materialise every tensor; msgpack tensors point into the body. */
  if (r->req_enc != SEGOPS_ENC_MSGPACK)
    for (int a = 0; a < r->dec.req.nargs; a++)
      if (!r->dec.req.args[a].shm_region) need += r->dec.req.args[a].t.nbytes; /* by reference: not held here */
  if (p->idx_buf) need += (size_t)p->call.n * sizeof(int32_t);
  size_t isz = segops_dtype_size(p->call.dtype);
  for (int k = 0; fn && k < fn->n_out; k++) {
    if (!p->requested[k]) continue;
    need += p->out_nbytes[k];
    /* msgpack answers are sent from the outputs themselves; JSON ones are text. */
    if (r->resp_enc != SEGOPS_ENC_MSGPACK) need += p->out_nbytes[k] / isz * JSON_BYTES_PER_NUMBER;
  }
  return need;
}
