/* test_peer.c: server/peer.c against real sockets: the uid of a unix-socket peer (SO_PEERCRED), of
 * a loopback TCP peer (socket diagnostics) over IPv4, IPv6 and a dual-stack listener, and the
 * descriptions. With --other-uid (root only, else SKIPPED with 77): peers of a child process running
 * as another uid are seen as that uid, and one running as the overflow uid as unknown. */
#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer.h"

static int failures;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                              \
    }                                                                          \
  } while (0)

#define OTHER_UID 54321 /* any uid but ours and the overflow uid */

/* A listening TCP socket on addr (port 0); its bound address in *bound. -1 when the family is
 * unavailable here. */
static int tcp_listener(int family, const char *addr, struct sockaddr_storage *bound) {
  int fd = socket(family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  memset(bound, 0, sizeof *bound);
  socklen_t len;
  if (family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)bound;
    a->sin_family = AF_INET;
    inet_pton(AF_INET, addr, &a->sin_addr);
    len = sizeof *a;
  } else {
    int off = 0;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)bound;
    a->sin6_family = AF_INET6;
    inet_pton(AF_INET6, addr, &a->sin6_addr);
    len = sizeof *a;
  }
  if (bind(fd, (struct sockaddr *)bound, len) != 0 || listen(fd, 8) != 0 ||
      getsockname(fd, (struct sockaddr *)bound, &len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Connects to 127.0.0.1 or ::1 at bound's port (connect_family picks which). */
static int tcp_connect(int connect_family, const struct sockaddr_storage *bound) {
  int port = bound->ss_family == AF_INET ? ((const struct sockaddr_in *)bound)->sin_port
                                         : ((const struct sockaddr_in6 *)bound)->sin6_port;
  int fd = socket(connect_family, SOCK_STREAM, 0);
  struct sockaddr_storage to;
  memset(&to, 0, sizeof to);
  socklen_t len;
  if (connect_family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)&to;
    a->sin_family = AF_INET;
    a->sin_port = (in_port_t)port;
    inet_pton(AF_INET, "127.0.0.1", &a->sin_addr);
    len = sizeof *a;
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&to;
    a->sin6_family = AF_INET6;
    a->sin6_port = (in_port_t)port;
    inet_pton(AF_INET6, "::1", &a->sin6_addr);
    len = sizeof *a;
  }
  if (fd >= 0 && connect(fd, (struct sockaddr *)&to, len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void check_tcp(int listen_family, const char *listen_addr, int connect_family) {
  struct sockaddr_storage bound;
  int l = tcp_listener(listen_family, listen_addr, &bound);
  if (l < 0) {
    printf("note: no %s listener here; case skipped\n", listen_addr);
    return;
  }
  int c = tcp_connect(connect_family, &bound);
  int s = c >= 0 ? accept(l, NULL, NULL) : -1;
  CHECK(s >= 0);
  if (s >= 0) {
    segops_peer p;
    segops_peer_identify(s, &p);
    CHECK(p.kind == SEGOPS_PEER_LOOPBACK);
    CHECK(segops_peer_same_host(&p));
    CHECK(p.uid_known && p.uid == geteuid());
    char buf[128];
    char want[64];
    snprintf(want, sizeof want, "(uid %lu)", (unsigned long)geteuid());
    CHECK(strstr(segops_peer_text(&p, buf, sizeof buf), want) != NULL);
    close(s);
  }
  if (c >= 0) close(c);
  close(l);
}

static void same_uid_cases(void) {
  CHECK(geteuid() != segops_peer_overflow_uid()); /* else nothing here can be known */
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  segops_peer p;
  segops_peer_identify(sv[0], &p);
  CHECK(p.kind == SEGOPS_PEER_UNIX && p.uid_known && p.uid == geteuid() && p.pid == getpid());
  char buf[128];
  CHECK(strstr(segops_peer_text(&p, buf, sizeof buf), "on a unix socket") != NULL);
  close(sv[0]);
  close(sv[1]);
  check_tcp(AF_INET, "127.0.0.1", AF_INET);
  check_tcp(AF_INET6, "::1", AF_INET6);
  check_tcp(AF_INET6, "::", AF_INET); /* dual stack: the peer is seen as ::ffff:127.0.0.1 */
  /* Not a socket: nothing known. */
  segops_peer_identify(0 /* stdin */, &p);
  CHECK(!p.uid_known);
  /* An address pair no socket has: no uid. */
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(1)}, b = a;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  inet_pton(AF_INET, "127.0.0.1", &b.sin_addr);
  uid_t u;
  CHECK(segops_peer_tcp_uid((struct sockaddr *)&a, (struct sockaddr *)&b, &u) == -1);
}

/* Child: runs as uid, connects to the TCP listener and the unix socket path, waits for the
 * parent to close, exits. */
static void child_connect(uid_t uid, const struct sockaddr_storage *bound, const char *path) {
  if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) _exit(3);
  int c = tcp_connect(AF_INET, bound);
  int u = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  if (c < 0 || u < 0 || connect(u, (struct sockaddr *)&sa, sizeof sa) != 0) _exit(4);
  char b;
  (void)!read(c, &b, 1);
  _exit(0);
}

static void other_uid_case(uid_t uid, bool known) {
  struct sockaddr_storage bound;
  int l = tcp_listener(AF_INET, "127.0.0.1", &bound);
  char path[108];
  snprintf(path, sizeof path, "/tmp/segops-test-peer-%d.sock", (int)getpid());
  unlink(path);
  int ul = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  CHECK(l >= 0 && ul >= 0 && bind(ul, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(ul, 4) == 0);
  chmod(path, 0777);
  pid_t pid = fork();
  if (pid == 0) child_connect(uid, &bound, path);
  int s = accept(l, NULL, NULL), us = accept(ul, NULL, NULL);
  CHECK(s >= 0 && us >= 0);
  segops_peer p, q;
  segops_peer_identify(s, &p);
  segops_peer_identify(us, &q);
  CHECK(p.kind == SEGOPS_PEER_LOOPBACK && q.kind == SEGOPS_PEER_UNIX);
  CHECK(p.uid_known == known && q.uid_known == known);
  if (known) CHECK(p.uid == uid && q.uid == uid && q.pid == pid);
  close(s);
  close(us);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(l);
  close(ul);
  unlink(path);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--other-uid")) {
    if (geteuid() != 0) {
      printf("not root: cannot run a peer as another uid; skipped\n");
      return 77;
    }
    other_uid_case(OTHER_UID, true);
    other_uid_case(segops_peer_overflow_uid(), false);
  } else {
    same_uid_cases();
  }
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("peer: ok\n");
  return 0;
}
