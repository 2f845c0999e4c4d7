/* http_watchdog.h: deadlines for request heads, bodies and answers (see http_watchdog.c). */
#ifndef SEGOPS_HTTP_WATCHDOG_H
#define SEGOPS_HTTP_WATCHDOG_H

#include <stdint.h>

typedef struct segops_watchdog segops_watchdog;
typedef struct segops_watch segops_watch; /* one connection's record */

typedef struct {
  double head_s;            /* a new connection must send a complete request head within this (<= 0: never cut) */
  double idle_s;            /* and a kept-alive one its next head, from the end of its last answer */
  double min_upload_rate;   /* bytes/s a body must keep up after idle_s (0: any) */
  double upload_max_s;      /* longest body upload (0: unbounded) */
  double min_download_rate; /* bytes/s an answer must be taken at, after answer_stall_s (0: any) */
  double answer_stall_s;    /* an answer the peer takes nothing of for this long is cut (0: never) */
} segops_watchdog_opts;

/* Starts the watchdog thread. A connection waiting longer than head_s for its first complete
 * request head, or idle_s for a later one, is cut. An upload (segops_watchdog_upload) is cut when
 * it falls below min_upload_rate after idle_s, runs longer than upload_max_s, or its peer closed
 * before the end. An answer (segops_watchdog_answer) is cut when the peer took none of it for
 * answer_stall_s, or has not taken all of it answer_stall_s + bytes / min_download_rate after it
 * was queued: the memory it holds comes back then. NULL on failure.
 * Owned by the caller: segops_watchdog_free after MHD_stop_daemon. */
segops_watchdog *segops_watchdog_new(const segops_watchdog_opts *opts);
void segops_watchdog_free(segops_watchdog *w); /* accepts NULL */

/* Starts watching the connection on fd (its head deadline runs from now); NULL when out of memory
 * (the connection is then left to libmicrohttpd's idle timeout). Removed (and freed) by
 * segops_watchdog_remove before the fd is closed; accepts NULL. */
segops_watch *segops_watchdog_add(segops_watchdog *w, int fd);
void segops_watchdog_remove(segops_watchdog *w, segops_watch *t);

/* A request head arrived (first access-handler call) / the request completed. NULL t: no-op. */
void segops_watchdog_request_begin(segops_watch *t);
void segops_watchdog_request_end(segops_watch *t);
/* A request body: bytes == 0 starts the upload clock, > 0 reports bytes received so far, < 0
 * ends it (the body is complete). NULL t: no-op. */
void segops_watchdog_upload(segops_watch *t, int64_t bytes);
/* An answer of `bytes` bytes was queued; it is watched until the request completes. NULL t: no-op. */
void segops_watchdog_answer(segops_watch *t, uint64_t bytes);

#endif
