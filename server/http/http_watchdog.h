/* http_watchdog.h: a deadline for request heads (see http_watchdog.c). */
#ifndef SEGOPS_HTTP_WATCHDOG_H
#define SEGOPS_HTTP_WATCHDOG_H

#include <microhttpd.h>
#include <stdint.h>

typedef struct segops_watchdog segops_watchdog;

/* Starts the watchdog thread: a connection that waits longer than limit_s for a complete request
 * head (from its start, or from the end of its previous request) is cut; limit_s <= 0 never cuts.
 * An upload (segops_watchdog_upload) is cut when it falls below min_rate bytes/s after limit_s,
 * runs longer than upload_max_s, or its peer closed before the end (0: no such bound).
 * NULL on failure.
 * Owned by the caller: segops_watchdog_free after MHD_stop_daemon. */
segops_watchdog *segops_watchdog_new(double limit_s, double min_rate, double upload_max_s);
void segops_watchdog_free(segops_watchdog *w); /* accepts NULL */

/* MHD_OPTION_NOTIFY_CONNECTION callback; cls is the watchdog. */
void segops_watchdog_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                            enum MHD_ConnectionNotificationCode code);
/* A request head arrived (first access-handler call) / the request completed. NULL w: no-op. */
void segops_watchdog_request_begin(segops_watchdog *w, struct MHD_Connection *conn);
void segops_watchdog_request_end(segops_watchdog *w, struct MHD_Connection *conn);
/* A request body: bytes == 0 starts the upload clock, > 0 reports bytes received so far, < 0
 * ends it (the body is complete). NULL w: no-op. */
void segops_watchdog_upload(segops_watchdog *w, struct MHD_Connection *conn, int64_t bytes);

#endif
