/* http_conn.h: per-connection state of the HTTP front (its peer, its watchdog record, whether it
 * was admitted past the connection limit) and per-peer accounting (connections, request memory
 * held), so that one peer can take neither every connection slot nor the whole in-flight budget.
 * A peer is its uid where the kernel knows it (unix sockets, loopback TCP: peer.h), else its
 * address. */
#ifndef SEGOPS_HTTP_CONN_H
#define SEGOPS_HTTP_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "http_watchdog.h"
#include "peer.h"

/* Connections libmicrohttpd takes beyond --max-connections, for /healthz and /readyz alone: a
 * full house still answers its health checks. */
#define SEGOPS_HTTP_HEALTH_RESERVE 16

typedef struct segops_peer_slot segops_peer_slot; /* one peer's counters, shared by its connections */

/* The socket context of a connection (MHD_CONNECTION_INFO_SOCKET_CONTEXT): created when
 * libmicrohttpd starts it, freed when it closes; its requests borrow it. */
typedef struct {
  segops_watch *watch;    /* the watchdog's record (NULL: untracked) */
  segops_peer peer;       /* who is at the other end */
  segops_peer_slot *slot; /* the peer's counters; NULL when not admitted */
  bool reserve;           /* admitted past --max-connections: health routes only, then closed */
} segops_http_conn;

typedef struct segops_conns segops_conns;

/* The per-peer table: at most max_total connections (plus SEGOPS_HTTP_HEALTH_RESERVE for health
 * checks), max_per_peer of one peer. NULL when out of memory. */
segops_conns *segops_conns_new(int64_t max_total, int64_t max_per_peer);
void segops_conns_free(segops_conns *t); /* accepts NULL; every connection has left */

enum { SEGOPS_CONN_ADMITTED = 0, SEGOPS_CONN_RESERVE = 1, SEGOPS_CONN_REFUSED = -1 };
/* Counts cn (whose peer is identified) in: SEGOPS_CONN_ADMITTED, SEGOPS_CONN_RESERVE (over the
 * total: health checks only), or SEGOPS_CONN_REFUSED (its peer is at its own limit, or the reserve
 * is full, or out of memory: cn->slot stays NULL). */
int segops_conns_admit(segops_conns *t, segops_http_conn *cn);
void segops_conns_leave(segops_conns *t, segops_http_conn *cn); /* undoes an admission; accepts one refused */

/* Reserves bytes of the peer's share (limit) of request memory; false (nothing taken) when over.
 * NULL s (an untracked connection) takes nothing and succeeds. */
bool segops_peer_slot_take(segops_peer_slot *s, size_t bytes, int64_t limit);
void segops_peer_slot_give(segops_peer_slot *s, size_t bytes);

/* Raises the soft open-files limit to the hard one, and lowers cfg->max_connections (with a
 * warning) when even then the listeners' connections would not leave file descriptors for the
 * rest of the daemon: libmicrohttpd busy-loops when accept() fails with EMFILE. */
void segops_http_fit_fd_limit(segops_config *cfg);

#endif
