/* native.h: the native same-node channel, daemon side (proto/native.md): a unix socket beside the
 * HTTP listeners where a client hands over its memory as memfds and runs calls through a shared
 * ring, with no HTTP and no copy per call. main.c starts it after the HTTP server and stops it
 * after the HTTP drain. */
#ifndef SEGOPS_NATIVE_H
#define SEGOPS_NATIVE_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "config.h"
#include "prepare.h"
#include "scheduler.h"

typedef struct segops_native segops_native;

/* What the channel borrows from the daemon; everything must outlive segops_native_stop. */
typedef struct {
  const segops_config *cfg;
  segops_backend *backend;
  segops_sched *sched;
  const segops_limits *limits;
  /* True while calls are taken (ready, or the lame-duck part of a drain); false while draining:
   * then every new call is answered SEGOPS_E_UNAVAILABLE, "segopsd is draining". */
  bool (*takes_work)(const void *ctx);
  const void *ctx;
} segops_native_deps;

/* The socket path the configuration asks for into path: --native-socket as given, or, when it is
 * empty, <dir>/native.sock in a directory of its own made now (mkdtemp /tmp/segopsd-<port>-XXXXXX,
 * mode 0711: only the daemon's user or root can write it; *own_dir set) from the first TCP
 * listener's bound port (port), else "<first unix listener>.native". "" for off. *derived tells
 * whether it was derived (a derived path that cannot be served is a warning; a configured one an
 * error). */
void segops_native_socket_path(const segops_config *cfg, int port, char *path, size_t len, bool *derived,
                               bool *own_dir);

/* Serves the channel on a unix socket at path (bound without a window: a stale socket file is
 * replaced, a live one or a non-socket refused, the mode from --socket-mode). own_dir: path's
 * directory was made by segops_native_socket_path and is removed with the socket (also when this
 * fails). NULL after logging an error when it cannot. Owned by the caller: segops_native_stop. */
segops_native *segops_native_start(const segops_native_deps *d, const char *path, bool own_dir);

/* The socket's path (static while n lives). */
const char *segops_native_path(const segops_native *n);

/* Stops: the socket closes and its file goes, and every channel ends once its calls in flight are
 * answered (their memory unpinned, unmapped and closed). Call it after the scheduler is drained
 * and before it is freed. Accepts NULL. */
void segops_native_stop(segops_native *n);

#endif
