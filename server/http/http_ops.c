/* http_ops.c: POST /v1/{op}/{pass}: header checks, body accumulation under the cap, decode,
 * validation, hand-off to the scheduler with the connection suspended, and the response
 * (msgpack payloads sent from the output buffers themselves through an iovec response). */
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "errors.h"
#include "hostbuf.h"
#include "http.h"
#include "log.h"

static const char *header(segops_http_req *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

static void release_body(segops_http_req *r) {
  if (r->body_pooled)
    segops_hostbuf_free(r->body);
  else
    free(r->body);
  r->body = NULL;
  r->body_pooled = false;
  r->len = r->cap = 0;
  segops_budget_release(r, &r->reserved);
}

/* The body is reserved against --max-inflight-bytes as it arrives, BODY_STEP ahead, not as a
 * whole from Content-Length: an upload that stalls or dies holds only what it sent. The buffer
 * itself is allocated whole (its pages are touched only as bytes come). A body of a known length
 * of SEGOPS_HOSTBUF_MIN bytes or more, when the budget could hold its whole length now, is read
 * into a pooled host buffer (hostbuf.h: reused, its pages present, pinned for direct device copies
 * of its tensors); it is reserved as it arrives all the same, and the buffer goes back to the pool
 * (whose memory is capped on its own) when the request ends, however it ends. */
#define BODY_STEP ((size_t)1 << 20)

segops_http_outcome segops_http_op_begin(segops_http_req *r) {
  int enc = segops_http_content_type(header(r, MHD_HTTP_HEADER_CONTENT_TYPE));
  if (enc < 0)
    return segops_http_error(r, SEGOPS_E_UNSUPPORTED_MEDIA, 0,
                             "Content-Type must be application/msgpack (or application/x-msgpack, "
                             "application/vnd.msgpack) or application/json",
                             NULL, false);
  r->req_enc = enc;
  r->resp_enc = segops_http_accept(header(r, MHD_HTTP_HEADER_ACCEPT), enc, &r->resp_type);
  if (r->resp_enc < 0)
    return segops_http_error(r, SEGOPS_E_NOT_ACCEPTABLE, 0,
                             "Accept allows neither application/msgpack nor application/json", NULL, false);
  return segops_http_body_start(r);
}

segops_http_outcome segops_http_body_start(segops_http_req *r) {
  segops_server *srv = r->srv;
  const char *cl = header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
  size_t initial = 64 * 1024;
  if (cl) {
    char *end;
    unsigned long long v = strtoull(cl, &end, 10);
    if (end == cl || *end || (int64_t)v > srv->cfg->max_body_bytes || v > (unsigned long long)INT64_MAX) {
      char msg[160];
      snprintf(msg, sizeof msg,
               "the request body (%.32s bytes) exceeds the limit of %" PRId64 " bytes (--max-body-bytes)", cl,
               srv->cfg->max_body_bytes);
      return segops_http_error(r, SEGOPS_E_TOO_LARGE, 0, msg, NULL, true);
    }
    initial = (size_t)v + 1; /* exact: no regrowth for the common case */
  } else if ((int64_t)initial > srv->cfg->max_body_bytes) {
    initial = (size_t)srv->cfg->max_body_bytes + 1;
  }
  const bool pool = cl && initial >= SEGOPS_HOSTBUF_MIN && segops_budget_room(srv, initial);
  if (!segops_budget_take(r, &r->reserved, initial < BODY_STEP ? initial : BODY_STEP))
    return segops_http_error(r, SEGOPS_E_RESOURCE_EXHAUSTED, 0, segops_budget_refusal(r), NULL, true);
  if (pool) {
    r->body = segops_hostbuf_alloc(initial);
    r->body_pooled = r->body != NULL;
  } else {
    r->body = malloc(initial);
  }
  if (!r->body) return segops_http_error(r, SEGOPS_E_NOMEM, 0, "out of memory for the request body", NULL, true);
  r->cap = initial;
  segops_watchdog_upload(segops_http_watch(r), 0);
  return SEGOPS_HTTP_READ_BODY;
}

/* Answers in the middle of an upload: 413 for a chunked body over the cap (a Content-Length
 * over it is refused before the body), 503 when the in-flight budget runs out. libmicrohttpd
 * 0.9.x takes no response while the handler is being fed upload data, so the answer is written
 * to the socket here, complete and with "Connection: close"; the rest of the body is then read
 * and dropped (at most 1 MiB more, and within the watchdog's upload bounds, so the client can
 * read the answer before the close, which would otherwise reset the connection), and the
 * connection closed without a libmicrohttpd response. If the write does not go through at once,
 * the answer follows at the end of the body through the normal path. */
#define OVERFLOW_DRAIN_BYTES ((uint64_t)1 << 20)
static void answer_mid_upload(segops_http_req *r, int err, const char *status_line, const char *message) {
  char body[384], msg[1024];
  int bl =
      snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", segops_err_code(err), message);
  int status = segops_err_http_status(err);
  int ml = snprintf(msg, sizeof msg,
                    "HTTP/1.1 %s\r\nConnection: close\r\nContent-Type: application/json\r\n%s"
                    "Content-Length: %d\r\n\r\n%s",
                    status_line, status == 503 ? "Retry-After: 1\r\n" : "", bl, body);
  r->overflow = true;
  r->overflow_err = err;
  release_body(r);
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!ci || bl <= 0 || (size_t)bl >= sizeof body || ml <= 0 || (size_t)ml >= sizeof msg) return;
  /* Counted before the bytes leave: once they are out, the client may read the answer and scrape
   * /metrics before this thread runs again (a loaded CI machine showed it); and the connection
   * may linger until the client's close is noticed. The decision is what is counted: if the write
   * does not go through, the same status follows through the normal path, not counted twice. */
  r->status = status;
  r->bytes_out = (uint64_t)bl;
  segops_metrics_request(r->route, r->op, r->pass, status, r->bytes_in, r->bytes_out);
  segops_metrics_rejected(err);
  r->counted = true;
  ssize_t w = send(ci->connect_fd, msg, (size_t)ml, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w == ml) r->raw_answered = true;
}

enum MHD_Result segops_http_op_body(segops_http_req *r, const char *data, size_t *size) {
  size_t n = *size;
  *size = 0;
  r->bytes_in += n;
  if (r->overflow) { /* discarding the rest of an oversized chunked upload */
    r->dropped += n;
    return r->raw_answered && r->dropped > OVERFLOW_DRAIN_BYTES ? MHD_NO : MHD_YES;
  }
  segops_server *srv = r->srv;
  size_t max = (size_t)srv->cfg->max_body_bytes;
  if (n > max - r->len) {
    /* Only a chunked upload gets here (a Content-Length over the cap was refused up front). */
    char m[160];
    snprintf(m, sizeof m, "the request body exceeds the limit of %" PRId64 " bytes (--max-body-bytes)",
             srv->cfg->max_body_bytes);
    answer_mid_upload(r, SEGOPS_E_TOO_LARGE, "413 Payload Too Large", m);
    return MHD_YES;
  }
  if (r->len + n > r->reserved) {
    size_t want = r->len + n + BODY_STEP;
    if (want > max + 1) want = max + 1;
    if (!segops_budget_take(r, &r->reserved, want - r->reserved)) {
      answer_mid_upload(r, SEGOPS_E_RESOURCE_EXHAUSTED, "503 Service Unavailable", segops_budget_refusal(r));
      return MHD_YES;
    }
  }
  if (r->len + n > r->cap) {
    size_t ncap = r->cap * 2;
    if (ncap < r->len + n) ncap = r->len + n;
    if (ncap > max + 1) ncap = max + 1;
    /* Only a chunked body grows: one with a Content-Length (every pooled one) was sized to it,
     * and libmicrohttpd passes on no more than it says. */
    if (r->body_pooled) return MHD_NO;
    char *nb = realloc(r->body, ncap);
    if (!nb) return MHD_NO; /* out of memory: drop the connection rather than abort */
    r->body = nb;
    r->cap = ncap;
  }
  memcpy(r->body + r->len, data, n);
  r->len += n;
  segops_watchdog_upload(segops_http_watch(r), (int64_t)r->len);
  return MHD_YES;
}

static void on_job_done(segops_job *job) {
  segops_http_req *r = job->user;
  /* After this call the connection may be handled at once by its HTTP thread. */
  MHD_resume_connection(r->conn);
}

/* The body in the request's encoding, decoded into r->dec. */
static int decode(segops_http_req *r, char *err, size_t errlen) {
  segops_server *srv = r->srv;
  segops_op op = (segops_op)r->op;
  segops_pass pass = (segops_pass)r->pass;
  switch (r->req_enc) {
    case SEGOPS_ENC_MSGPACK:
      return segops_decode_msgpack(r->body, r->len, op, pass, &srv->codec_limits, &r->dec, err, errlen);
    case SEGOPS_ENC_JSON:
      return segops_decode_json(r->body, r->len, op, pass, &srv->codec_limits, &r->dec, err, errlen);
    default:
      return segops_decode_oip(r->body, r->len, op, pass, &srv->codec_limits, &r->dec, &r->oip, err, errlen);
  }
}

segops_http_outcome segops_http_op_complete(segops_http_req *r) {
  segops_server *srv = r->srv;
  char err[512];
  segops_watchdog_upload(segops_http_watch(r), -1);
  if (r->overflow) {
    if (r->raw_answered) return SEGOPS_HTTP_FAIL; /* answered already: just close */
    if (r->overflow_err == SEGOPS_E_TOO_LARGE)
      snprintf(err, sizeof err, "the request body exceeds the limit of %" PRId64 " bytes (--max-body-bytes)",
               srv->cfg->max_body_bytes);
    else
      snprintf(err, sizeof err, "%s", segops_budget_refusal(r));
    return segops_http_error(r, r->overflow_err, 0, err, NULL, true);
  }
  int rc = decode(r, err, sizeof err);
  if (rc != SEGOPS_OK) return segops_http_error(r, rc, 0, err, NULL, false);
  rc = segops_shm_use_inputs(srv->shm, segops_http_peer_uid(r), &r->dec.req, &r->shm_use, err, sizeof err);
  if (rc != SEGOPS_OK) return segops_http_error(r, rc, 0, err, NULL, false);
  r->dec.req.owner = segops_http_peer_uid(r) >= 0 ? (uint32_t)segops_http_peer_uid(r) + 1u : 0; /* idx cache */
  rc = segops_prepare(&r->dec.req, &srv->limits, &r->prep, err, sizeof err);
  if (rc != SEGOPS_OK) return segops_http_error(r, rc, 0, err, NULL, false);
  /* Everything else the request will hold, reserved before compute (outputs and answer limits:
   * segops_prepare). */
  if (!segops_budget_take(r, &r->reserved_work, segops_budget_work_bytes(r)))
    return segops_http_error(r, SEGOPS_E_RESOURCE_EXHAUSTED, 0, segops_budget_refusal(r), NULL, false);
  rc = segops_shm_use_outputs(srv->shm, segops_http_peer_uid(r), &r->dec.req, &r->prep, &r->shm_use, err, sizeof err);
  if (rc != SEGOPS_OK) return segops_http_error(r, rc, 0, err, NULL, false);

  r->job.call = &r->prep.call;
  r->job.deadline = r->t_start + srv->cfg->request_timeout_s;
  r->job.done = on_job_done;
  r->job.user = r;
  r->job.owner = segops_http_peer_uid(r) >= 0 ? (uint32_t)segops_http_peer_uid(r) + 1u : 0; /* its uid's share */
  segops_http_busy(r);
  /* A small call runs right here when a device is free: no hand-off, no suspend/resume. */
  if (segops_sched_run_inline(srv->sched, &r->job)) return segops_http_op_respond(r);
  /* Suspend before submitting: a worker may finish and resume the connection before this
   * callback returns, and resuming a connection that is not suspended is undefined. */
  MHD_suspend_connection(r->conn);
  rc = segops_sched_submit(srv->sched, &r->job);
  if (rc != SEGOPS_OK) {
    r->job.status = rc;
    r->job.t_enqueued = r->job.t_started = r->job.t_finished = segops_now();
    snprintf(r->job.err, sizeof r->job.err, "%s",
             rc != SEGOPS_E_RESOURCE_EXHAUSTED  ? "the server is draining"
             : segops_sched_owner_full(&r->job) ? "this client's uid has its share of the request queue waiting "
                                                  "(--max-queue-per-uid); retry later"
                                                : "the request queue is full (--max-queue); retry later");
    MHD_resume_connection(r->conn); /* answered from the resumed callback like every other job */
  }
  return SEGOPS_HTTP_SUSPENDED;
}

/* What a successful op response owns: the encoded pieces and the output buffer they borrow. */
typedef struct {
  segops_encoded enc;
  void *out_buf;
} resp_payload;

/* The Server-Timing value without printf, which formatting two doubles made a tenth of a tiny
 * request's own instructions: s seconds as milliseconds with three decimals ("12.345"), s >= 0. */
static char *put_ms(char *o, double s) {
  const uint64_t us = s < 1e9 ? (uint64_t)(s * 1e6 + 0.5) : (uint64_t)1e15;
  o = segops_put_u64(o, us / 1000);
  *o++ = '.';
  *o++ = (char)('0' + us / 100 % 10);
  *o++ = (char)('0' + us / 10 % 10);
  *o++ = (char)('0' + us % 10);
  return o;
}

static void free_payload(void *cls) {
  resp_payload *p = cls;
  segops_encoded_free(&p->enc);
  segops_hostbuf_free(p->out_buf);
  free(p);
}

/* Answers up to this size are copied into one buffer: libmicrohttpd then writes the head and the
 * body with one sendmsg, where an iovec answer costs a second system call (and segment) for the
 * head. Both take p (freed on failure too); NULL: out of memory. */
#define FLAT_RESPONSE_BYTES ((size_t)16 << 10)
static struct MHD_Response *flat_response(resp_payload *p) {
  char *flat = malloc(p->enc.total ? p->enc.total : 1);
  struct MHD_Response *resp = NULL;
  if (flat) {
    size_t o = 0;
    for (int i = 0; i < p->enc.iovcnt; o += p->enc.iov[i].iov_len, i++)
      memcpy(flat + o, p->enc.iov[i].iov_base, p->enc.iov[i].iov_len);
    resp = MHD_create_response_from_buffer(p->enc.total, flat, MHD_RESPMEM_MUST_FREE);
    if (!resp) free(flat);
  }
  free_payload(p);
  return resp;
}
/* The encoder's pieces as they are: libmicrohttpd copies the iovec array (not the data) and calls
 * free_payload when done. */
static struct MHD_Response *iovec_response(resp_payload *p) {
  struct MHD_IoVec stack_iov[16];
  struct MHD_IoVec *iov = p->enc.iovcnt <= 16 ? stack_iov : malloc(sizeof *iov * (size_t)p->enc.iovcnt);
  struct MHD_Response *resp = NULL;
  if (iov) {
    for (int i = 0; i < p->enc.iovcnt; i++) {
      iov[i].iov_base = p->enc.iov[i].iov_base;
      iov[i].iov_len = p->enc.iov[i].iov_len;
    }
    resp = MHD_create_response_from_iovec(iov, (unsigned int)p->enc.iovcnt, free_payload, p);
    if (iov != stack_iov) free(iov);
  }
  if (!resp) free_payload(p);
  return resp;
}

segops_http_outcome segops_http_op_respond(segops_http_req *r) {
  segops_job *j = &r->job;
  double queue_s = j->t_started - j->t_enqueued, compute_s = j->t_finished - j->t_started;
  if (queue_s < 0) queue_s = 0;
  if (compute_s < 0) compute_s = 0;
  segops_metrics_observe(SEGOPS_HIST_QUEUE, r->op, r->pass, queue_s);
  if (j->status == SEGOPS_OK) segops_metrics_observe(SEGOPS_HIST_COMPUTE, r->op, r->pass, compute_s);
  /* The inputs are no longer needed: give their memory back before encoding. */
  segops_decoded_free(&r->dec);
  memset(&r->dec, 0, sizeof r->dec);
  release_body(r);
  char *timing = r->timing;
  char *t = put_ms(segops_put_lit(timing, "queue;dur="), queue_s);
  *put_ms(segops_put_lit(t, ", compute;dur="), compute_s) = '\0';
  if (j->status != SEGOPS_OK) {
    if (j->status == SEGOPS_E_INTERNAL || j->status == SEGOPS_E_DEVICE)
      SEGOPS_LOGE("%s/%s failed: %s", segops_op_name((segops_op)r->op), segops_pass_name((segops_pass)r->pass), j->err);
    return segops_http_error(r, j->status, 0, j->err, NULL, false);
  }
  char shm_err[512];
  int src = segops_shm_use_finish(&r->shm_use, &r->prep, shm_err, sizeof shm_err);
  if (src != SEGOPS_OK) return segops_http_error(r, src, 0, shm_err, NULL, false);

  const segops_fn_desc *fn = r->prep.call.fn;
  segops_out_tensor outs[SEGOPS_MAX_OUTPUTS];
  bool binary[SEGOPS_MAX_OUTPUTS];
  int n = 0;
  for (int k = 0; k < fn->n_out; k++) {
    if (!r->prep.requested[k]) continue;
    binary[n] = r->oip.out_set[k] ? r->oip.out_binary[k] : r->oip.binary_default;
    segops_out_tensor *o = &outs[n++];
    memset(o, 0, sizeof *o);
    o->shm_region = segops_shm_use_output(&r->shm_use, k, &o->shm_offset);
    o->name = fn->out[k].name;
    o->dtype = r->prep.call.dtype;
    o->ndim = r->prep.out_ndim[k];
    memcpy(o->shape, r->prep.out_shape[k], sizeof o->shape);
    o->data = r->prep.call.out[k];
    o->nbytes = r->prep.out_nbytes[k];
  }
  resp_payload *p = calloc(1, sizeof *p);
  if (!p) return segops_http_error(r, SEGOPS_E_NOMEM, 0, "out of memory for the response", NULL, false);
  int rc = r->resp_enc == SEGOPS_ENC_MSGPACK ? segops_encode_msgpack(outs, n, &p->enc)
           : r->resp_enc == SEGOPS_ENC_JSON
               ? segops_encode_json(outs, n, &p->enc)
               : segops_encode_oip((segops_op)r->op, (segops_pass)r->pass, r->oip.has_id ? r->oip.id : NULL, outs,
                                   binary, n, &p->enc);
  if (rc != SEGOPS_OK) {
    free_payload(p);
    return segops_http_error(r, rc, 0, "could not encode the response", NULL, false);
  }
  /* The response now owns the outputs (msgpack pieces point into them). */
  p->out_buf = r->prep.out_buf;
  r->prep.out_buf = NULL;
  const size_t total = p->enc.total, json_len = p->enc.json_len;
  struct MHD_Response *resp = total <= FLAT_RESPONSE_BYTES ? flat_response(p) : iovec_response(p);
  if (!resp) return segops_http_error(r, SEGOPS_E_NOMEM, 0, "out of memory for the response", NULL, false);
  if (r->resp_enc == SEGOPS_ENC_OIP && json_len < total) {
    char hl[24];
    *segops_put_u64(hl, json_len) = '\0';
    MHD_add_response_header(resp, "Inference-Header-Content-Length", hl);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
  } else {
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->resp_type);
  }
  MHD_add_response_header(resp, "Server-Timing", timing);
  /* Draining (lame duck): served, but the connection closes after it, so a client or proxy
   * holding keep-alive connections reconnects, to a daemon that is staying. */
  if (atomic_load(&r->srv->state) == SEGOPS_STATE_LAME_DUCK)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ret = MHD_queue_response(r->conn, MHD_HTTP_OK, resp);
  MHD_destroy_response(resp);
  if (ret != MHD_YES) return SEGOPS_HTTP_FAIL;
  r->status = 200;
  r->bytes_out = total;
  segops_watchdog_answer(segops_http_watch(r), total); /* a client that stops taking it is cut */
  return SEGOPS_HTTP_ANSWERED;
}

/* After a request this large, free memory goes back to the system at once (malloc_trim):
 * a JSON body's tree is many small blocks the allocator would otherwise keep. */
#define TRIM_AFTER_BYTES ((uint64_t)32 << 20)

void segops_http_op_free(segops_http_req *r) {
  segops_shm_use_release(&r->shm_use);
  bool big = r->bytes_in + r->reserved_work > TRIM_AFTER_BYTES;
  segops_decoded_free(&r->dec);
  segops_prepared_free(&r->prep);
  release_body(r);
  segops_budget_release(r, &r->reserved_work);
  if (big) malloc_trim(0);
}
