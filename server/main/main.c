/* main.c: segopsd entry point: configuration, backend choice, scheduler, HTTP server, the native
 * channel, and the signal-driven graceful shutdown (any terminating signal but SIGHUP -> drain ->
 * exit 0). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "config.h"
#include "errors.h"
#include "hostbuf.h"
#include "http.h"
#include "log.h"
#include "native.h"
#include "scheduler.h"
#include "segops_ring.h"
#include "shares.h"
#include "shm_guard.h"

static segops_backend *make_backend(const segops_config *c) {
  char err[256] = "";
  if (!strcmp(c->backend, "cuda") || !strcmp(c->backend, "auto")) {
    int code = SEGOPS_OK;
    segops_backend *b = segops_cuda_backend_new(c->n_devices ? c->devices : NULL, c->n_devices, &code, err, sizeof err);
    if (b) return b;
    /* auto falls back to the CPU only when there is no usable GPU: a bad setting (--devices,
     * --cuda-*) is refused, rather than silently serving from the CPU. */
    if (!strcmp(c->backend, "cuda") || code != SEGOPS_E_UNAVAILABLE) {
      if (code == SEGOPS_E_UNAVAILABLE)
        SEGOPS_LOGE("--backend %s: no usable GPU (%s)", c->backend, err[0] ? err : "unknown reason");
      else
        SEGOPS_LOGE("--backend %s: %s", c->backend, err[0] ? err : "unknown reason");
      return NULL;
    }
    /* Without an NVIDIA driver (no /dev/nvidiactl) the CUDA runtime's reason ("driver version is
     * insufficient") would mislead: there is simply no GPU. */
    if (access("/dev/nvidiactl", F_OK) != 0)
      SEGOPS_LOGI("no GPU found; serving from the CPU backend");
    else
      SEGOPS_LOGI("no usable GPU (%s); serving from the CPU backend", err[0] ? err : "unknown reason");
  }
  segops_backend *b = segops_cpu_backend_new(c->threads);
  if (!b) SEGOPS_LOGE("the CPU backend could not be created");
  return b;
}

/* Every catchable signal whose default action would end the process: all of them drain like
 * SIGTERM (docs/operations.md: no catchable signal ends the daemon without the drain), except SIGHUP,
 * which is taken and ignored. They are blocked in every thread and taken by main with sigwait.
 * SIGPIPE is ignored instead (a peer closing mid-write is an error return, not a signal); the
 * synchronous faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS) keep their
 * default action. */
static void shutdown_signals(sigset_t *set) {
  static const int SIGS[] = {SIGTERM,   SIGINT,  SIGQUIT, SIGHUP,  SIGUSR1, SIGUSR2, SIGALRM,
                             SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGPOLL, SIGPWR,  SIGSTKFLT};
  sigemptyset(set);
  for (size_t k = 0; k < sizeof SIGS / sizeof SIGS[0]; k++) sigaddset(set, SIGS[k]);
  for (int s = SIGRTMIN; s <= SIGRTMAX; s++) sigaddset(set, s); /* real-time signals end a process too */
}

static bool takes_work(const void *ctx) {
  return segops_server_takes_work(atomic_load(&((const segops_server *)ctx)->state));
}

/* The native channel beside the HTTP listeners (a derived path that cannot be served is only a
 * warning; a configured one stops the start). Returns -1 when the daemon must not start. */
static int start_native(segops_config *cfg, segops_server *srv, segops_native **out) {
  char path[108];
  bool derived, own_dir;
  *out = NULL;
  segops_native_socket_path(cfg, srv->port, path, sizeof path, &derived, &own_dir);
  if (!path[0]) {
    if (derived) SEGOPS_LOGW("native channel: no socket path can be derived (no TCP port); give --native-socket");
    return 0;
  }
  segops_native_deps d = {cfg, srv->backend, srv->sched, &srv->limits, takes_work, srv};
  *out = segops_native_start(&d, path, own_dir);
  if (!*out) {
    if (!derived) return -1;
    SEGOPS_LOGW("native channel off: %s could not be served (--native-socket PATH chooses another)", path);
    return 0;
  }
  snprintf(srv->native_socket, sizeof srv->native_socket, "%s", path);
  SEGOPS_LOGI("native channel on %s (version %u)", path, SEGOPS_NATIVE_VERSION);
  return 0;
}

/* What main has started, each NULL until it has; finish() stops what is there. */
typedef struct {
  segops_config *cfg; /* loaded (segops_config_free takes a failed load too) */
  segops_backend *backend;
  segops_sched *sched;
  bool hostbuf;       /* segops_hostbuf_attach'ed */
  segops_server *srv; /* started */
  segops_native *native;
} daemon_parts;

/* The one cleanup of main, in the reverse order of the start: the HTTP server drains (at once when
 * the start failed), the native channel answers "draining" from then on and stops, then the
 * scheduler, the pinned host buffers, the backend and the configuration go. Returns rc. */
static int finish(daemon_parts *d, int rc) {
  if (d->srv) {
    if (rc) d->cfg->drain_seconds = 0;
    segops_server_drain_and_stop(d->srv);
  }
  segops_native_stop(d->native);
  segops_sched_free(d->sched);
  if (d->hostbuf) segops_hostbuf_detach();
  segops_backend_free(d->backend);
  segops_config_free(d->cfg);
  return rc;
}

int main(int argc, char **argv) {
  segops_config cfg;
  daemon_parts d = {&cfg, NULL, NULL, false, NULL, NULL};
  char err[512] = "";
  int rc = segops_config_load(&cfg, argc, argv, err, sizeof err);
  if (rc == SEGOPS_CONFIG_EXIT_OK) return finish(&d, 0);
  if (rc != SEGOPS_CONFIG_OK) {
    fprintf(stderr, "segopsd: %s\n", err);
    return finish(&d, 2);
  }
  segops_log_level = cfg.log_level;
  segops_http_fit_fd_limit(&cfg); /* before any thread: a full descriptor table makes accept() spin */
  if (cfg.token && (cfg.token_file_mode & 077))
    SEGOPS_LOGW("--token-file %s has mode %04o: %s may read the token; chmod 600 it", cfg.token_file,
                cfg.token_file_mode, (cfg.token_file_mode & 07) ? "every user of this host" : "its group");
  if (segops_test_hooks_enabled())
    SEGOPS_LOGW("TEST BUILD: fault-injection hooks are enabled; never deploy this binary");

  /* Block the shutdown signals in every thread (inherited by the ones created below); this
   * thread takes them synchronously with sigwait. */
  sigset_t sigs;
  shutdown_signals(&sigs);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  segops_backend *backend = d.backend = make_backend(&cfg);
  if (backend && cfg.max_batch_elements == SEGOPS_BATCH_AUTO)
    cfg.max_batch_elements = strcmp(backend->name, "cpu") ? SEGOPS_BATCH_AUTO_GPU_ROWS : 0;
  if (!backend) return finish(&d, 1);
  segops_sched_opts so = {
      cfg.max_queue,
      cfg.max_batch_elements,
      cfg.max_queue_delay_us,
      cfg.request_timeout_s,
      cfg.worker_spin_us,
      cfg.max_queue_per_uid > 0 ? cfg.max_queue_per_uid : (cfg.max_queue / 2 > 0 ? cfg.max_queue / 2 : 1),
      cfg.max_running_per_uid};
  segops_sched *sched = d.sched = segops_sched_new(backend, &so);
  if (!sched) {
    SEGOPS_LOGE("cannot start the scheduler");
    return finish(&d, 1);
  }
  cfg.max_running_per_uid = segops_sched_running_share(sched); /* auto settled: /v1/info reports it */
  /* Every uid's share of the memory and mappings that outlive a request (shares.h, shm_guard.h). */
  segops_share_configure(SEGOPS_SHARE_MAPPED, cfg.max_mapped_bytes, cfg.max_mapped_bytes_per_uid);
  segops_share_configure(SEGOPS_SHARE_PINNED, cfg.max_pinned_bytes, cfg.max_pinned_bytes_per_uid);
  segops_guard_set_share((int)cfg.max_mappings_per_uid);
  segops_hostbuf_attach(backend); /* request bodies and outputs pinned for direct device copies */
  d.hostbuf = true;
  segops_server srv;
  memset(&srv, 0, sizeof srv);
  srv.cfg = &cfg;
  srv.backend = backend;
  srv.sched = sched;
  atomic_store(&srv.state, SEGOPS_STATE_STARTING);
  if (segops_server_start(&srv) != 0) return finish(&d, 1);
  d.srv = &srv;
  if (start_native(&cfg, &srv, &d.native) != 0) return finish(&d, 1);
  atomic_store(&srv.state, SEGOPS_STATE_READY);
  if (geteuid() == 0)
    SEGOPS_LOGI(
        "running as root: shared memory maps only objects owned by the requesting client's uid or open to "
        "every user, for clients whose uid the kernel reports (proto/API.md, Shared memory)");
  for (int k = 0; k < srv.n_listeners; k++) printf("segopsd listening on %s\n", srv.listeners[k].url);
  fflush(stdout);
  SEGOPS_LOGI("backend %s (%d worker%s), %d HTTP threads, auth %s, max body %lld bytes, queue %lld%s", backend->name,
              backend->n_devices, backend->n_devices == 1 ? "" : "s", cfg.http_threads, cfg.token ? "on" : "off",
              (long long)cfg.max_body_bytes, (long long)cfg.max_queue,
              cfg.max_batch_elements > 0 ? ", batching on" : "");

  int sig = 0;
  for (;;) {
    if (sigwait(&sigs, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    SEGOPS_LOGI("received SIGHUP: ignored (logs go to stderr, there is nothing to reopen)");
  }
  SEGOPS_LOGI("received signal %d (%s); draining", sig, strsignal(sig));
  finish(&d, 0);
  SEGOPS_LOGI("stopped");
  return 0;
}
