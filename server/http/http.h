/* http.h: the HTTP front of segopsd on libmicrohttpd: the server object, per-request state,
 * and the helpers shared by the route files (http_*.c, oip_routes.c, shm_routes.c). */
#ifndef SEGOPS_HTTP_H
#define SEGOPS_HTTP_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "codec.h"
#include "config.h"
#include "http_conn.h"
#include "http_watchdog.h"
#include "metrics.h"
#include "oip.h"
#include "prepare.h"
#include "scheduler.h"
#include "shm.h"
#include "shm_io.h"

/* LAME_DUCK: a shutdown signal arrived; /readyz says 503 but work is still served (for
 * --drain-seconds, while load balancers remove the endpoint). DRAINING: new work gets 503. */
enum { SEGOPS_STATE_STARTING = 0, SEGOPS_STATE_READY, SEGOPS_STATE_LAME_DUCK, SEGOPS_STATE_DRAINING };

/* True while op requests are taken (ready, or lame duck during the drain period). */
static inline bool segops_server_takes_work(int state) {
  return state == SEGOPS_STATE_READY || state == SEGOPS_STATE_LAME_DUCK;
}

/* One listening address and the libmicrohttpd daemon that serves it (every listener shares the
 * server's callbacks and state). */
typedef struct {
  struct MHD_Daemon *mhd;
  char url[160];               /* "http://HOST:PORT" with the bound port, or "unix:/path" */
  int port;                    /* TCP: the bound port; 0 for unix sockets */
  char unix_path[108];         /* unix: the socket file we created ("" for TCP) */
  unsigned long long dev, ino; /* unix: its identity, so exit unlinks only our own file */
} segops_listener;

typedef struct segops_server {
  const segops_config *cfg; /* borrowed */
  segops_backend *backend;  /* borrowed */
  segops_sched *sched;      /* borrowed */
  struct MHD_Daemon *mhd;   /* listeners[0].mhd */
  segops_listener listeners[SEGOPS_MAX_LISTEN];
  int n_listeners;
  atomic_int state;
  atomic_long active;             /* request states alive: created on the first callback, freed on completion */
  atomic_int_fast64_t body_bytes; /* request memory reserved now (bounded by max_inflight_bytes) */
  atomic_long busy;               /* of those, the ones accepted for work or being answered (see segops_http_busy) */
  segops_limits limits;
  segops_codec_limits codec_limits;
  int port;                   /* the first TCP listener's bound port (0 when only unix sockets) */
  segops_watchdog *watchdog;  /* owned: deadlines of heads, bodies and answers */
  struct segops_conns *conns; /* owned: per-peer connections and request memory (http_conn.h) */
  segops_shm *shm;            /* owned: the shared-memory registry (shm.h) */
  char native_socket[108];    /* the native channel's socket (server/native/), "" when off; set by main */
} segops_server;

/* Wire encodings. SEGOPS_ENC_OIP: the Open Inference Protocol's JSON header + binary tensor data. */
enum { SEGOPS_ENC_MSGPACK = 0, SEGOPS_ENC_JSON = 1, SEGOPS_ENC_OIP = 2 };

/* What a route handler did with a request; on_request alone turns it into the next phase. */
typedef enum {
  SEGOPS_HTTP_FAIL = 0,     /* nothing could be queued: libmicrohttpd closes the connection */
  SEGOPS_HTTP_ANSWERED,     /* a response is queued */
  SEGOPS_HTTP_DEFERRED,     /* an error is recorded, answered once the (small) body is dropped */
  SEGOPS_HTTP_ANSWER_LATER, /* answer (route's finish) once the request is fully read */
  SEGOPS_HTTP_READ_BODY,    /* feed the body to the request's buffer, then call the route's finish */
  SEGOPS_HTTP_SUSPENDED,    /* the connection waits on work; the route's resume answers it */
  SEGOPS_HTTP_DRAIN, /* answered on the socket already: the body is read and dropped, then the connection closed */
} segops_http_outcome;

/* Per-request state: created on the first access-handler callback, freed only in the
 * NOTIFY_COMPLETED callback (libmicrohttpd's contract). */
/* PH_GET: a GET route answered on the next callback (answering on the first one would make
 * libmicrohttpd close the connection). PH_ERROR: an error decided on the first callback,
 * answered once the (small) body has been read and discarded, so keep-alive survives. */
/* PH_DRAIN: an error answered on the first callback before a body the client is still sending;
 * the body is read and dropped so that the client's send completes and it reads the answer. */
enum { PH_BODY = 0, PH_WAIT, PH_DONE, PH_GET, PH_ERROR, PH_DRAIN };
struct segops_http_route;
typedef struct {
  segops_server *srv;
  struct MHD_Connection *conn;
  segops_http_conn *cn;                /* the connection's context (http_conn.h), borrowed; NULL when untracked */
  const struct segops_http_route *rt;  /* the matched row of the route table, NULL for none */
  segops_route route;                  /* the metric the request is counted under */
  char param[SEGOPS_SHM_NAME_MAX + 1]; /* a {name} segment of the path, NUL-terminated */
  bool oip_errors;                     /* errors as {"error": "message"}: an OIP route, or a /v2 path */
  int op, pass;                        /* for SEGOPS_ROUTE_OP (v1 op, v2 model); -1 until known */
  int phase;
  char *body;       /* owned */
  bool body_pooled; /* body from segops_hostbuf_alloc (else malloc) */
  size_t len, cap;
  bool overflow;        /* body over the limit (chunked upload): the rest is discarded */
  bool busy;            /* counted in srv->busy */
  bool raw_answered;    /* the 413 of an overflow was written to the socket directly */
  uint64_t dropped;     /* bytes discarded after the overflow */
  int overflow_err;     /* why the upload was refused: SEGOPS_E_TOO_LARGE or SEGOPS_E_RESOURCE_EXHAUSTED */
  bool counted;         /* already in the request metrics */
  size_t reserved;      /* bytes of srv->body_bytes this request holds for its body */
  size_t reserved_work; /* and for its decoded inputs, outputs and encoded answer (http_budget.c) */
  bool over_peer_share; /* the last refused reservation met the peer's share, not the whole budget */
  int req_enc, resp_enc;
  segops_oip_opts oip;   /* SEGOPS_ENC_OIP: the request's header length and output choices */
  const char *resp_type; /* static Content-Type of a successful op response */
  double t_start;
  segops_decoded dec;   /* owned until the job finished */
  segops_prepared prep; /* owned; out_buf moves to the response on success */
  segops_job job;
  bool first_call; /* during the first callback (its errors may be deferred: segops_http_error) */
  struct {
    int err, http_status;
    const char *allow;
    char message[512];
  } deferred;
  char timing[96]; /* Server-Timing value once the scheduler answered; "" before */
  int status;      /* HTTP status queued; 0 before */
  uint64_t bytes_in, bytes_out;
  segops_shm_use shm_use; /* regions an op request reads or writes (shm_io.h) */
} segops_http_req;

/* The watchdog record of r's connection (NULL when untracked). */
static inline segops_watch *segops_http_watch(const segops_http_req *r) { return r->cn ? r->cn->watch : NULL; }
/* r's peer uid when the kernel knows it, else -1 (peer.h). */
static inline int64_t segops_http_peer_uid(const segops_http_req *r) {
  return r->cn && r->cn->peer.uid_known ? (int64_t)r->cn->peer.uid : -1;
}

/* Starts one libmicrohttpd daemon per address of cfg->listen; fills srv->listeners and srv->port.
 * Returns 0, or -1 after logging (nothing left running). */
int segops_server_start(segops_server *srv);
/* Graceful stop (README.md, Configuration; segopsd --help): readyz 503 at once, work served for cfg->drain_seconds,
 * then new op requests 503, queued and running work finished and every response sent, then libmicrohttpd stopped (no
 * connection is suspended then). Work still running after cfg->shutdown_timeout_s ends the process with exit status 1.
 */
void segops_server_drain_and_stop(segops_server *srv);

/* --- helpers (http_reply.c) --- */

/* Marks a request as accepted for work or being answered: the drain waits for these, while a
 * request still uploading its body only gets a grace period. Idempotent. */
void segops_http_busy(segops_http_req *r);

/* Content-Type -> SEGOPS_ENC_* or -1 (unsupported). NULL/empty -> -1. */
int segops_http_content_type(const char *ctype);
/* Accept -> SEGOPS_ENC_* (req_enc when the client accepts anything) or -1 (nothing acceptable).
 * *type receives the Content-Type to answer with. */
int segops_http_accept(const char *accept, int req_enc, const char **type);
/* Constant-time check of an Authorization header against the token. */
bool segops_http_auth_ok(const char *authorization, const char *token);
/* Queues a JSON error with the status of the error table (or http_status when > 0):
 * {"error":{"code","message"}} on v1 routes, {"error":"message"} on the Open Inference Protocol's.
 * Adds Allow / WWW-Authenticate / Retry-After where the status needs them; close=true adds
 * Connection: close. During the first callback of a request with a small or no body the error is
 * recorded instead (SEGOPS_HTTP_DEFERRED) and answered once the body is dropped; one that must go
 * at once (close=true) before a body of a known length the client will send is written to the
 * socket, which is then half-closed, and the body read and dropped (SEGOPS_HTTP_DRAIN): a client
 * blocked in sending it would otherwise meet a reset instead of the answer. */
segops_http_outcome segops_http_error(segops_http_req *r, int err, int http_status, const char *message,
                                      const char *allow, bool close);
/* Queues a response built from a malloc'd buffer (taken over: freed by libmicrohttpd). */
segops_http_outcome segops_http_send_buffer(segops_http_req *r, int status, const char *ctype, char *buf, size_t len);
/* Queues a JSON document (a jansson json_t *, consumed) as 200 application/json. */
segops_http_outcome segops_http_send_json(segops_http_req *r, void *json);

/* --- the in-flight memory budget (http_budget.c) --- */

/* Reserves bytes against --max-inflight-bytes and r's peer's share of it
 * (--max-inflight-bytes-per-peer) into *held; false (nothing taken) when over either. */
bool segops_budget_take(segops_http_req *r, size_t *held, size_t bytes);
/* Gives back what *held holds. */
void segops_budget_release(segops_http_req *r, size_t *held);
/* The message of a 503 after segops_budget_take failed for r: which limit it met. */
const char *segops_budget_refusal(const segops_http_req *r);
/* Memory a prepared request still needs beyond its body: decoded inputs the decoder made
 * (JSON numbers materialised), the idx copy, the outputs and the encoded answer. */
size_t segops_budget_work_bytes(const segops_http_req *r);

/* Whether `bytes` more would fit in the budget now (nothing taken). */
bool segops_budget_room(segops_server *srv, size_t bytes);

/* --- request-head rules (http_strict.c) --- */

/* Refuses, on the first call, a head libmicrohttpd let through: conflicting Content-Length,
 * Content-Length with Transfer-Encoding (400), a Transfer-Encoding other than chunked (501),
 * HTTP/1.1 without Host, an encoded NUL in the path (400); each answered at once with
 * Connection: close. Returns true with *ret set when it answered. */
bool segops_http_strict_head(segops_http_req *r, const char *url, const char *version, segops_http_outcome *ret);
/* MHD_OPTION_UNESCAPE_CALLBACK: percent-decoding that leaves %2F and %00 as written. */
size_t segops_http_unescape(void *cls, struct MHD_Connection *conn, char *s);
/* MHD_OPTION_URI_LOG_CALLBACK: drops the query string before libmicrohttpd parses it (http_strict.c). */
void *segops_http_uri_seen(void *cls, const char *uri, struct MHD_Connection *conn);
/* The head announces a body (Transfer-Encoding, or a Content-Length other than 0). */
bool segops_http_has_body(struct MHD_Connection *conn);

/* --- the route table (http_routes.c) --- */
typedef segops_http_outcome (*segops_http_handler)(segops_http_req *r);
enum { SEGOPS_M_GET = 1u, SEGOPS_M_HEAD = 2u, SEGOPS_M_POST = 4u };
enum {
  SEGOPS_RF_OPEN = 1u, /* served without the token (health checks) */
  SEGOPS_RF_OIP = 2u,  /* an Open Inference Protocol route: errors are {"error": "message"} */
  SEGOPS_RF_WORK = 4u, /* takes work: refused with 503 + Connection: close while draining */
};
/* One route. pattern: literal path segments, or "{op}", "{pass}" (a v1 function), "{model}" (an
 * OIP model, <op>_<pass>; sets r->op and r->pass) and "{name}" (copied into r->param), each one
 * segment. begin runs on the first callback once auth and method passed; a NULL begin means
 * SEGOPS_HTTP_ANSWER_LATER. finish answers (or, after READ_BODY, takes the complete body); resume
 * answers a SUSPENDED request. */
typedef struct segops_http_route {
  const char *pattern;
  unsigned methods;
  segops_route metric;
  unsigned flags;
  segops_http_handler begin, finish, resume;
} segops_http_route;
/* Finds the route of a path. NULL when none: then msg gets the 404's message (which names an
 * unknown op, pass or model where the path has the shape of a route). */
const segops_http_route *segops_http_route_find(const char *url, segops_http_req *r, char *msg, size_t msglen);
/* "GET, HEAD" / "POST" for a route's methods. */
const char *segops_http_route_allow(const segops_http_route *rt);

/* --- route handlers --- */
segops_http_outcome segops_http_info(segops_http_req *r);    /* http_info.c */
segops_http_outcome segops_http_metrics(segops_http_req *r); /* http_info.c */
segops_http_outcome segops_http_healthz(segops_http_req *r); /* http_info.c */
segops_http_outcome segops_http_readyz(segops_http_req *r);  /* http_info.c */
/* Why the server cannot take work now ("starting", "draining", ...), or NULL when it can. */
const char *segops_http_not_ready(segops_server *srv); /* http_info.c */
/* http_ops.c: running a function for a v1 or OIP request. begin checks v1's headers; body_start
 * sizes and reserves the body buffer; body feeds it (on_request calls it with each piece);
 * complete decodes, validates and submits; respond encodes the outputs. */
segops_http_outcome segops_http_op_begin(segops_http_req *r);
segops_http_outcome segops_http_body_start(segops_http_req *r);
enum MHD_Result segops_http_op_body(segops_http_req *r, const char *data, size_t *size);
segops_http_outcome segops_http_op_complete(segops_http_req *r);
segops_http_outcome segops_http_op_respond(segops_http_req *r);
void segops_http_op_free(segops_http_req *r);
/* oip_routes.c: the Open Inference Protocol's routes. */
segops_http_outcome segops_v2_live(segops_http_req *r);
segops_http_outcome segops_v2_ready(segops_http_req *r);
segops_http_outcome segops_v2_server(segops_http_req *r);
segops_http_outcome segops_v2_model(segops_http_req *r);
segops_http_outcome segops_v2_model_ready(segops_http_req *r);
segops_http_outcome segops_v2_infer_begin(segops_http_req *r);
/* shm_routes.c: the system shared-memory routes ({name} is the region). */
segops_http_outcome segops_http_shm_post_begin(segops_http_req *r);
segops_http_outcome segops_http_shm_register(segops_http_req *r);
segops_http_outcome segops_http_shm_unregister(segops_http_req *r);
segops_http_outcome segops_http_shm_unregister_all(segops_http_req *r);
segops_http_outcome segops_http_shm_status(segops_http_req *r);
segops_http_outcome segops_http_shm_status_all(segops_http_req *r);

#endif
