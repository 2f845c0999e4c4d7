/* peer.h: who is at the other end of a connected stream socket, as far as the kernel knows it: the
 * uid from SO_PEERCRED on a unix socket, from the kernel's socket diagnostics (NETLINK_SOCK_DIAG,
 * the uid owning the client's end, what `ss -e` shows) on loopback TCP, and only the address for
 * any other TCP peer. Shared memory, per-peer limits and what /v1/info tells a peer are decided
 * from this; any transport with a socket fd may use it (no HTTP here). */
#ifndef SEGOPS_PEER_H
#define SEGOPS_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

typedef enum {
  SEGOPS_PEER_UNKNOWN = 0, /* not a socket we understand, or its addresses could not be read */
  SEGOPS_PEER_UNIX,        /* a unix-domain socket: this host */
  SEGOPS_PEER_LOOPBACK,    /* TCP from a loopback address: this host (and this network namespace) */
  SEGOPS_PEER_REMOTE,      /* TCP from any other address */
} segops_peer_kind;

typedef struct {
  segops_peer_kind kind;
  bool uid_known;               /* false where the kernel does not say, or says the overflow uid */
  uid_t uid;                    /* valid when uid_known */
  pid_t pid;                    /* unix sockets: the peer's pid when connecting (0 elsewhere); for logs only */
  struct sockaddr_storage addr; /* TCP: the peer's address and port */
  socklen_t addr_len;           /* 0 when none */
} segops_peer;

/* Identifies the peer of fd, the daemon's end of an accepted stream socket. Never fails: what
 * cannot be established stays unknown (kind SEGOPS_PEER_UNKNOWN, uid_known false). Costs a few
 * system calls, one netlink round trip for loopback TCP: call it once per connection. */
void segops_peer_identify(int fd, segops_peer *out);

/* The uid owning the TCP socket whose own address is `client` and whose peer is `server` (both
 * AF_INET or AF_INET6; an IPv4-mapped IPv6 address is looked up as IPv4), from one
 * SOCK_DIAG_BY_FAMILY request. Returns 0 with *uid set, or -1 (no such socket, no netlink, the
 * overflow uid of an unmapped user namespace). */
int segops_peer_tcp_uid(const struct sockaddr *client, const struct sockaddr *server, uid_t *uid);

/* The kernel's overflow uid (/proc/sys/kernel/overflowuid, 65534 when unreadable): what a uid
 * from another user namespace that has no mapping in ours reads as. Never a known peer. */
uid_t segops_peer_overflow_uid(void);

/* True for a loopback address (127/8, ::1, or ::ffff:127.x.y.z): config_values.c, for --listen. */
bool segops_addr_is_loopback(const struct sockaddr *sa);

/* True for a peer on this host: a unix socket or loopback TCP. */
bool segops_peer_same_host(const segops_peer *p);

/* A short description for logs and messages, e.g. "uid 1000 on a unix socket", "127.0.0.1 (uid
 * 1000)", "10.0.0.7 (uid unknown)". Returns buf. */
const char *segops_peer_text(const segops_peer *p, char *buf, size_t cap);

#endif
