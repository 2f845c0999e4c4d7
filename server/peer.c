/* peer.c: the peer of a connected stream socket (see peer.h). */
#include "peer.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

static uid_t g_overflow = 65534;
static pthread_once_t g_overflow_once = PTHREAD_ONCE_INIT;

static void read_overflow_uid(void) {
  FILE *f = fopen("/proc/sys/kernel/overflowuid", "r");
  if (!f) return;
  unsigned long v;
  if (fscanf(f, "%lu", &v) == 1) g_overflow = (uid_t)v;
  fclose(f);
}

uid_t segops_peer_overflow_uid(void) {
  pthread_once(&g_overflow_once, read_overflow_uid);
  return g_overflow;
}

bool segops_addr_is_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET) return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
  }
  return false;
}

/* An IPv4-mapped IPv6 address as the IPv4 one (a dual-stack listener sees IPv4 clients so; their
 * own sockets are IPv4). Other addresses are copied as they are. */
static void unmap(const struct sockaddr *sa, struct sockaddr_storage *out) {
  memset(out, 0, sizeof *out);
  if (sa->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)sa)->sin6_addr)) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
    struct sockaddr_in *s4 = (struct sockaddr_in *)out;
    s4->sin_family = AF_INET;
    s4->sin_port = s6->sin6_port;
    memcpy(&s4->sin_addr, &s6->sin6_addr.s6_addr[12], 4);
  } else {
    memcpy(out, sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
  }
}

/* Fills a request's socket id from the client's and the server's address (same family). */
static void fill_id(struct inet_diag_sockid *id, const struct sockaddr *client, const struct sockaddr *server) {
  memset(id, 0, sizeof *id);
  if (client->sa_family == AF_INET) {
    const struct sockaddr_in *c = (const struct sockaddr_in *)client, *s = (const struct sockaddr_in *)server;
    id->idiag_sport = c->sin_port;
    id->idiag_dport = s->sin_port;
    memcpy(id->idiag_src, &c->sin_addr, 4);
    memcpy(id->idiag_dst, &s->sin_addr, 4);
  } else {
    const struct sockaddr_in6 *c = (const struct sockaddr_in6 *)client, *s = (const struct sockaddr_in6 *)server;
    id->idiag_sport = c->sin6_port;
    id->idiag_dport = s->sin6_port;
    memcpy(id->idiag_src, &c->sin6_addr, 16);
    memcpy(id->idiag_dst, &s->sin6_addr, 16);
  }
  id->idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  id->idiag_cookie[1] = INET_DIAG_NOCOOKIE;
}

/* One exact-match SOCK_DIAG_BY_FAMILY request (no dump) and its answer: the socket's uid. */
static int diag_uid(int nl, const struct sockaddr *client, const struct sockaddr *server, uid_t *uid) {
  struct {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 r;
  } req;
  memset(&req, 0, sizeof req);
  req.nlh.nlmsg_len = sizeof req;
  req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.nlh.nlmsg_flags = NLM_F_REQUEST;
  req.nlh.nlmsg_seq = 1;
  req.r.sdiag_family = (uint8_t)client->sa_family;
  req.r.sdiag_protocol = IPPROTO_TCP;
  req.r.idiag_states = ~0u;
  fill_id(&req.r.id, client, server);
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  if (sendto(nl, &req, sizeof req, 0, (struct sockaddr *)&kernel, sizeof kernel) != (ssize_t)sizeof req) return -1;
  /* The kernel answers at once; the poll only bounds a kernel that does not (never block). */
  struct pollfd pfd = {.fd = nl, .events = POLLIN};
  if (poll(&pfd, 1, 1000) != 1) return -1;
  long buf[1024]; /* aligned for nlmsghdr */
  ssize_t n = recv(nl, buf, sizeof buf, 0);
  for (struct nlmsghdr *h = (struct nlmsghdr *)buf; n > 0 && NLMSG_OK(h, (unsigned)n); h = NLMSG_NEXT(h, n)) {
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg))) return -1;
    const struct inet_diag_msg *m = NLMSG_DATA(h);
    *uid = (uid_t)m->idiag_uid;
    return 0;
  }
  return -1; /* NLMSG_ERROR (ENOENT: no such socket) or nothing */
}

int segops_peer_tcp_uid(const struct sockaddr *client, const struct sockaddr *server, uid_t *uid) {
  struct sockaddr_storage c, s;
  unmap(client, &c);
  unmap(server, &s);
  if (c.ss_family != s.ss_family || (c.ss_family != AF_INET && c.ss_family != AF_INET6)) return -1;
  int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return -1;
  uid_t u = 0;
  int rc = diag_uid(nl, (struct sockaddr *)&c, (struct sockaddr *)&s, &u);
  close(nl);
  if (rc != 0 || u == segops_peer_overflow_uid()) return -1;
  *uid = u;
  return 0;
}

static void identify_unix(int fd, segops_peer *p) {
  p->kind = SEGOPS_PEER_UNIX;
  struct ucred cr;
  socklen_t len = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof cr) return;
  p->pid = cr.pid;
  /* A peer in another user namespace whose uid has no mapping here reads as the overflow uid. */
  if (cr.uid == segops_peer_overflow_uid()) return;
  p->uid = cr.uid;
  p->uid_known = true;
}

void segops_peer_identify(int fd, segops_peer *p) {
  memset(p, 0, sizeof *p);
  struct sockaddr_storage self;
  socklen_t sl = sizeof self;
  if (getsockname(fd, (struct sockaddr *)&self, &sl) != 0) return;
  if (self.ss_family == AF_UNIX) return identify_unix(fd, p);
  if (self.ss_family != AF_INET && self.ss_family != AF_INET6) return;
  socklen_t pl = sizeof p->addr;
  if (getpeername(fd, (struct sockaddr *)&p->addr, &pl) != 0) return;
  p->addr_len = pl;
  if (!segops_addr_is_loopback((struct sockaddr *)&p->addr)) {
    p->kind = SEGOPS_PEER_REMOTE;
    return;
  }
  p->kind = SEGOPS_PEER_LOOPBACK;
  /* The client's socket has the peer's address as its own and ours as its peer. */
  uid_t u;
  if (segops_peer_tcp_uid((struct sockaddr *)&p->addr, (struct sockaddr *)&self, &u) == 0) {
    p->uid = u;
    p->uid_known = true;
  }
}

bool segops_peer_same_host(const segops_peer *p) {
  return p->kind == SEGOPS_PEER_UNIX || p->kind == SEGOPS_PEER_LOOPBACK;
}

const char *segops_peer_text(const segops_peer *p, char *buf, size_t cap) {
  char addr[INET6_ADDRSTRLEN] = "?", uid[32] = "uid unknown";
  if (p->uid_known) snprintf(uid, sizeof uid, "uid %lu", (unsigned long)p->uid);
  if (p->kind == SEGOPS_PEER_UNIX) {
    snprintf(buf, cap, "%s on a unix socket", uid);
    return buf;
  }
  if (p->addr_len && p->addr.ss_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)&p->addr)->sin_addr, addr, sizeof addr);
  else if (p->addr_len && p->addr.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&p->addr)->sin6_addr, addr, sizeof addr);
  snprintf(buf, cap, "%s (%s)", addr, uid);
  return buf;
}
