/* native_internal.h: the native channel's daemon-side state, shared by its files: the server
 * (native_server.c: socket, accept, per-user limits, stop), a channel (native_channel.c:
 * handshake, control messages, the ring's doorbell) and a call (native_call.c). Not for main.c. */
#ifndef SEGOPS_NATIVE_INTERNAL_H
#define SEGOPS_NATIVE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "native.h"
#include "native_check.h"
#include "native_mem.h"
#include "segops_chan.h"
#include "segops_ring.h"

#define SEGOPS_NATIVE_MAX_POOLS 256

typedef struct native_channel native_channel;

/* One slot's call while the daemon holds it (the slot's busy flag is set). */
typedef struct {
  native_channel *ch;
  uint32_t slot;
  uint64_t seq;
  segops_ring_request req; /* the daemon's own copy, made before any check */
  segops_native_checked chk;
  segops_prepared prep;
  segops_job job;
  double t0;
} native_call;

struct native_channel {
  segops_native *srv;
  int sock;
  pid_t pid;
  uid_t uid;
  gid_t gid;
  unsigned long id; /* for log lines */
  segops_native_mem ring;
  segops_ring_header *hdr;
  uint32_t nslots;
  segops_native_mem pools[SEGOPS_NATIVE_MAX_POOLS];
  segops_native_view views[SEGOPS_NATIVE_MAX_POOLS];
  uint32_t npools;         /* written by the channel's thread only; pools never go before the channel */
  uint64_t mapped, pinned; /* bytes, ring included */
  uint64_t state_bytes;    /* the daemon's bookkeeping for the slots, charged as mapped memory (shares.h) */
  native_call *calls;      /* nslots */
  atomic_uchar *busy;      /* nslots: the daemon holds the slot's call */
  pthread_mutex_t mu;
  pthread_cond_t idle;
  int inflight;    /* calls handed to the scheduler and not answered; under mu */
  bool watched;    /* the accept thread wakes the channel when its client goes (native_server.c) */
  bool has_cpuclk; /* cpuclk is the client process's CPU clock (the spin policy, native_channel.c) */
  clockid_t cpuclk;
  int32_t stat_tid;     /* the caller_tid that stat_fd, its /proc/<pid>/task/<tid>/stat, was opened for */
  int stat_fd;          /* -1: none or that open failed; the channel thread's only */
  native_channel *next; /* in the server's list, under its lock */
};

struct segops_native {
  segops_native_deps d;
  char path[108];
  bool own_dir;                /* path's directory is the daemon's own (segops_native_socket_path): removed at stop */
  unsigned long long dev, ino; /* the socket file's identity, so stop unlinks only our own */
  int listen_fd;
  int wake[2]; /* a pipe that wakes the accept thread to stop */
  int ep;      /* the accept thread's epoll set: the socket, the pipe, every channel's hang-up */
  pthread_t accept_thread;
  pthread_mutex_t mu;
  pthread_cond_t gone;
  native_channel *channels;
  int live; /* channel threads running */
  unsigned long next_id;
  atomic_bool stopping;
};

/* native_server.c: the per-user count of open channels; false (nothing taken) when over. */
bool segops_native_user_take(segops_native *n, uid_t uid, char *err, size_t errlen);
void segops_native_user_give(segops_native *n, uid_t uid);
/* native_server.c: whether a warning about uid may be logged now (at most one a second per uid;
 * *skipped: how many were not since the last one); otherwise log at debug. */
bool segops_native_may_warn(uid_t uid, unsigned *skipped);
/* native_server.c: takes a channel's socket out of the accept thread's watch (before it closes).
 * Under n->mu, with the channel out of the server's list. */
void segops_native_unwatch(segops_native *n, native_channel *ch);

/* native_channel.c: sends ERROR (code, message) on a channel socket. */
void segops_native_send_error(int sock, int code, const char *message);
/* native_channel.c: the thread of one accepted connection (arg: its native_channel, owned). */
void *segops_native_channel_main(void *arg);

/* native_call.c: takes slot k (busy already set) and answers it, now or from the scheduler's done
 * callback; may_inline lets it run on the calling thread when the scheduler would start it at
 * once anyway. */
void segops_native_call_start(native_channel *ch, uint32_t k, bool may_inline);

/* The slot k of a channel's ring. */
static inline segops_ring_slot *segops_native_slot(native_channel *ch, uint32_t k) {
  return segops_chan_slot(ch->ring.base, k);
}

/* Wakes a channel's thread wherever it is in its wait: the doorbell moves (so a thread about to
 * sleep does not), then a sleeping one is woken. ch->hdr must be mapped. */
void segops_native_ring_wake(native_channel *ch);
/* The spin policy's /proc stat file of the client thread tid, in place of the channel's last (native_channel.c). */
void segops_native_stat_open(native_channel *ch, int32_t tid);

#endif
