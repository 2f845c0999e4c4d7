/* test_native_hostile.c: hostile and dying clients of the native channel, one case per run
 * (argv[1]). In every case a well-behaved client keeps calling beside the hostile one and must
 * see every call succeed, and once the hostile channels end the daemon's descriptors, mappings
 * and threads come back to what they were (and its memory within a margin). */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "native_harness.h"

static char DIR_[160];
static nh_daemon D;
static segops_mem *MEM;
#define POOL_BYTES (1u << 20)

/* ---- the well-behaved client beside every case ---- */

typedef struct {
  segops_transport *t;
  volatile int stop;
  int done, failed;
  segops_error e;
} good;

static void *good_main(void *arg) {
  good *g = arg;
  while (!g->stop) {
    if (nh_good_call(g->t, &g->e))
      g->done++;
    else
      g->failed++;
    nh_sleep(0.002);
  }
  return NULL;
}

static nh_usage BASE;
/* Resident memory the daemon may gain over a case and keep: 16 MiB; 48 MiB with the CUDA backend,
 * whose driver allocates host memory as kernels and streams are first used (a case on one H100 ended
 * 17 MiB above its baseline). A leak in the channel's handling grows with the case's thousands of
 * hostile requests, far past either. */
static long RSS_SLACK_KB = 16384;
static good G;
static pthread_t G_TH;

/* Starts the daemon with args, the good client (warmed: its channel, ring and pool are in place
 * once a call has been answered), the baseline, and the good client's calling thread. */
static bool begin(bool test_build, const char *const *args, const char *const *env) {
  if (nh_daemon_start(&D, DIR_, test_build, args, env)) return false;
  memset(&G, 0, sizeof G);
  G.t = nh_native(&D, MEM, NULL, 10);
  if (!G.t) return false;
  for (int i = 0; i < 3; i++) NH_CHECK(nh_good_call(G.t, &G.e), "good client warming up: %s", G.e.message);
  BASE = nh_usage_of(D.pid);
  char *info = NULL;
  if (nh_http_get(D.url, "/v1/info", NULL, &info) == 200 && info &&
      (strstr(info, "\"backend\":\"cuda\"") || strstr(info, "\"backend\": \"cuda\"")))
    RSS_SLACK_KB = 49152;
  free(info);
  pthread_create(&G_TH, NULL, good_main, &G);
  return true;
}

/* Whether the daemon's descriptors, memfd mappings and threads are back to the baseline. */
static bool back_to_base(nh_usage *u) {
  *u = nh_usage_of(D.pid);
  return u->fds == BASE.fds && u->memfd_maps == BASE.memfd_maps && u->threads == BASE.threads;
}

/* Stops the good client once it has made a few more calls after the hostile one (progress, not a
 * time: a loaded machine makes calls slower, never wrong); checks its calls and that the daemon's
 * resources came back (a client that goes is noticed at once: the daemon watches every channel's
 * socket, so the bound below is only for a machine that stalls). */
static void end(void) {
  int want = G.done + 3;
  for (double until = segops_client_now() + 30;
       __atomic_load_n(&G.done, __ATOMIC_RELAXED) < want && !G.failed && segops_client_now() < until;)
    nh_sleep(0.001);
  G.stop = 1;
  pthread_join(G_TH, NULL);
  NH_CHECK(G.failed == 0, "the good client saw %d failed calls: %s", G.failed, G.e.message);
  NH_CHECK(G.done >= want, "the good client made only %d calls (%d wanted) in 30 s", G.done, want);
  nh_usage u;
  for (double until = segops_client_now() + 10; !back_to_base(&u) && segops_client_now() < until;) nh_sleep(0.005);
  NH_CHECK(u.fds == BASE.fds, "descriptors: %d before, %d after", BASE.fds, u.fds);
  NH_CHECK(u.memfd_maps == BASE.memfd_maps, "memfd mappings: %d before, %d after", BASE.memfd_maps, u.memfd_maps);
  /* Other mappings may grow a little and stay: malloc's per-thread arenas and glibc's cache of
   * thread stacks, reused by later channels (and AddressSanitizer's allocator maps as it goes). */
#ifndef __SANITIZE_ADDRESS__
  NH_CHECK(u.maps <= BASE.maps + 48, "mappings: %d before, %d after", BASE.maps, u.maps);
#endif
  NH_CHECK(u.threads == BASE.threads, "threads: %d before, %d after", BASE.threads, u.threads);
#ifndef __SANITIZE_ADDRESS__ /* AddressSanitizer keeps freed memory in its quarantine (256 MB) */
  NH_CHECK(u.rss_kb <= BASE.rss_kb + RSS_SLACK_KB, "memory: %ld kB before, %ld kB after", BASE.rss_kb, u.rss_kb);
#endif
  NH_CHECK(nh_good_call(G.t, &G.e), "the good client after: %s", G.e.message);
  G.t->vt->close(G.t);
  G.t = NULL;
}

/* A raw channel with one pool of POOL_BYTES mapped here at *p: x (float64 ones) at 0, idx at
 * 512 KiB, outputs above 768 KiB. */
static bool raw_with_pool(nh_raw *r, int *fd, unsigned char **p, int64_t n, int64_t s) {
  char msg[512];
  int rc = nh_raw_open(r, D.sock, NULL, 64, msg);
  NH_CHECK(rc == 0, "raw channel: %s", msg);
  if (rc) return false;
  *fd = nh_memfd(POOL_BYTES, true);
  rc = nh_raw_pool(r, *fd, POOL_BYTES, msg);
  NH_CHECK(rc == 0, "pool: %s", msg);
  *p = mmap(NULL, POOL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  double *x = (double *)(void *)*p;
  int32_t *idx = (int32_t *)(void *)(*p + (512u << 10));
  for (int64_t i = 0; i < n; i++) x[i] = 1, idx[i] = (int32_t)(i % s);
  return rc == 0;
}

static void raw_drop(nh_raw *r, int fd, unsigned char *p) {
  if (p) munmap(p, POOL_BYTES);
  if (fd >= 0) close(fd);
  nh_raw_close(r);
}

/* ---- a client that dies (SIGKILL) with calls in flight ---- */

static void case_die_mid_call(void) {
  const char *env[] = {"SEGOPS_TEST_DELAY_MS=40", NULL};
  if (!begin(true, NULL, env)) return;
  for (int round = 0; round < 3; round++) {
    int pfd[2];
    NH_CHECK(pipe(pfd) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
      nh_raw r;
      int fd;
      unsigned char *p;
      if (!raw_with_pool(&r, &fd, &p, 1000, 10)) _exit(1);
      for (uint32_t k = 0; k < 8; k++) {
        segops_ring_request q = nh_sum_request(1000, 10, 0, 512u << 10, (768u << 10) + k * 128);
        nh_raw_submit(&r, k, &q, k + 1);
      }
      (void)!write(pfd[1], "x", 1);
      pause();
      _exit(0);
    }
    char c;
    NH_CHECK(read(pfd[0], &c, 1) == 1, "the child did not submit");
    nh_sleep(0.02);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(pfd[0]);
    close(pfd[1]);
    nh_sleep(0.1); /* the good client's calls wait behind the dead client's */
  }
  end();
}

/* ---- a client that closes its socket and unmaps with calls in flight ---- */

static void case_close_socket(void) {
  const char *env[] = {"SEGOPS_TEST_DELAY_MS=40", NULL};
  if (!begin(true, NULL, env)) return;
  for (int round = 0; round < 3; round++) {
    nh_raw r;
    int fd;
    unsigned char *p;
    if (!raw_with_pool(&r, &fd, &p, 1000, 10)) break;
    for (uint32_t k = 0; k < 8; k++) {
      segops_ring_request q = nh_sum_request(1000, 10, 0, 512u << 10, (768u << 10) + k * 128);
      nh_raw_submit(&r, k, &q, k + 1);
    }
    nh_sleep(0.01);
    raw_drop(&r, fd, p);
    nh_sleep(0.1); /* the good client's calls wait behind the dropped ones */
  }
  end();
}

/* ---- a client that writes garbage all over its ring ---- */

typedef struct {
  nh_raw *r;
  volatile int stop;
  uint64_t seed;
} scribbler;

static void *scribble(void *arg) {
  scribbler *s = arg;
  size_t len = s->r->ring_len;
  while (!s->stop) {
    for (int i = 0; i < 512; i++) {
      size_t at = nh_rand(&s->seed) % len;
      s->r->ring[at] = (unsigned char)nh_rand(&s->seed);
    }
    /* and slots that look submitted, with plausible and implausible descriptors */
    uint32_t k = (uint32_t)(nh_rand(&s->seed) % s->r->slots);
    segops_ring_slot *sl = nh_raw_slot(s->r, k);
    if (nh_rand(&s->seed) & 1) {
      segops_ring_request q = nh_sum_request((int64_t)(nh_rand(&s->seed) % 5000), 10, nh_rand(&s->seed) % (1u << 21),
                                             512u << 10, (768u << 10) + (nh_rand(&s->seed) % 4) * 64);
      q.fn = (uint32_t)(nh_rand(&s->seed) % 24);
      memcpy(&sl->req, &q, sizeof q);
    }
    __atomic_store_n(&sl->state, (uint32_t)(nh_rand(&s->seed) % 4), __ATOMIC_RELEASE);
    __atomic_fetch_add(&s->r->hdr->doorbell, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &s->r->hdr->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0);
    nh_sleep(0.0002);
  }
  return NULL;
}

static void case_corrupt_ring(void) {
  if (!begin(false, NULL, NULL)) return;
  for (int round = 0; round < 2; round++) {
    nh_raw r;
    int fd;
    unsigned char *p;
    if (!raw_with_pool(&r, &fd, &p, 5000, 10)) break;
    scribbler s = {&r, 0, 7 + (uint64_t)round};
    pthread_t th;
    pthread_create(&th, NULL, scribble, &s);
    /* the pool's bytes too: descriptors point anywhere in it */
    for (int i = 0; i < 400; i++) {
      ((uint32_t *)(void *)p)[nh_rand(&s.seed) % (POOL_BYTES / 4)] = (uint32_t)nh_rand(&s.seed);
      nh_sleep(0.002);
    }
    s.stop = 1;
    pthread_join(th, NULL);
    raw_drop(&r, fd, p);
  }
  end();
}

/* ---- a client that rewrites idx from another thread during its calls ---- */

typedef struct {
  int32_t *idx;
  int64_t n;
  volatile int stop;
} flipper;

static void *flip(void *arg) {
  flipper *f = arg;
  uint64_t seed = 3;
  while (!f->stop) {
    int64_t i = (int64_t)(nh_rand(&seed) % (uint64_t)f->n);
    int32_t bad = (nh_rand(&seed) & 1) ? -5 : 1000000000;
    __atomic_store_n(&f->idx[i], bad, __ATOMIC_RELAXED);
    __atomic_store_n(&f->idx[i], (int32_t)(i % 10), __ATOMIC_RELAXED);
  }
  return NULL;
}

static void case_rewrite_idx(void) {
  if (!begin(false, NULL, NULL)) return;
  nh_raw r;
  int fd;
  unsigned char *p;
  const int64_t n = 60000;
  if (raw_with_pool(&r, &fd, &p, n, 10)) {
    flipper f = {(int32_t *)(void *)(p + (512u << 10)), n, 0};
    pthread_t th;
    pthread_create(&th, NULL, flip, &f);
    int ok = 0, refused = 0;
    for (uint64_t i = 0; i < 300; i++) {
      segops_ring_request q = nh_sum_request(n, 10, 0, 512u << 10, 768u << 10);
      nh_raw_submit(&r, 0, &q, i + 1);
      segops_ring_answer a;
      NH_CHECK(nh_raw_wait(&r, 0, 10, &a), "no answer");
      if (a.status == SEGOPS_OK) {
        ok++;
      } else {
        refused++;
        NH_CHECK(a.status == SEGOPS_E_INVALID_ARGUMENT && strstr(a.message, "idx["), "answer %d: %s", a.status,
                 a.message);
      }
    }
    f.stop = 1;
    pthread_join(th, NULL);
    printf("rewritten idx: %d calls ran, %d refused\n", ok, refused);
    raw_drop(&r, fd, p);
  }
  end();
}

/* ---- memory the daemon must refuse ---- */

/* Hands fd over as the next pool and expects a refusal whose message holds `want`. */
static void refused(nh_raw *r, int fd, uint64_t size, int code, const char *want, const char *what) {
  char msg[512] = "";
  int rc = nh_raw_pool(r, fd, size, msg);
  NH_CHECK(rc == code && strstr(msg, want), "%s: %d '%s' (wanted %d '%s')", what, rc, msg, code, want);
}

static void case_bad_memory(void) {
  const char *args[] = {"--native-max-map-bytes", "6M", NULL}; /* the good client's first pool is 4 MiB */
  if (!begin(false, args, NULL)) return;
  nh_raw r;
  char msg[512];
  int rc = nh_raw_open(&r, D.sock, NULL, 8, msg);
  NH_CHECK(rc == 0, "raw channel: %s", msg);
  if (rc) {
    end();
    return;
  }
  const int E = SEGOPS_E_INVALID_ARGUMENT;
  int unsealed = nh_memfd(65536, false);
  refused(&r, unsealed, 65536, E, "not sealed against shrinking", "an unsealed memfd");
  int pfd[2];
  NH_CHECK(pipe(pfd) == 0, "pipe");
  refused(&r, pfd[0], 4096, E, "not a regular file", "a pipe");
  char path[220];
  snprintf(path, sizeof path, "%s/plain", DIR_);
  int plain = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  NH_CHECK(ftruncate(plain, 65536) == 0, "ftruncate");
  refused(&r, plain, 65536, E, "not a memfd", "a regular file");
  char shm[64];
  snprintf(shm, sizeof shm, "/segops-native-test-%d", (int)getpid());
  int named = shm_open(shm, O_RDWR | O_CREAT | O_EXCL, 0600);
  NH_CHECK(named >= 0 && ftruncate(named, 65536) == 0, "shm_open");
  refused(&r, named, 65536, E, "not sealed against shrinking", "a named shm object");
  shm_unlink(shm);
  int good_fd = nh_memfd(65536, true);
  char self[64];
  snprintf(self, sizeof self, "/proc/self/fd/%d", good_fd);
  int ro = open(self, O_RDONLY | O_CLOEXEC);
  refused(&r, ro, 65536, E, "not open read-write", "a read-only descriptor");
  int wsealed = nh_memfd(65536, true);
  NH_CHECK(fcntl(wsealed, F_ADD_SEALS, F_SEAL_WRITE) == 0, "F_SEAL_WRITE");
  refused(&r, wsealed, 65536, E, "sealed against writing", "a write-sealed memfd");
  refused(&r, good_fd, 4096, E, "its message says 4096", "a size that is not the memfd's");
  int big = nh_memfd(8u << 20, true);
  refused(&r, big, 8u << 20, SEGOPS_E_RESOURCE_EXHAUSTED, "--native-max-map-bytes", "a pool over the cap");
  refused(&r, r.ring_fd, r.ring_len, E, "same memory as the ring", "the ring as a pool");
  /* The channel goes on after every refusal: the good memfd is pool 0, not twice. */
  rc = nh_raw_pool(&r, good_fd, 65536, msg);
  NH_CHECK(rc == 0, "a good pool after the refusals: %s", msg);
  int dup_fd = dup(good_fd);
  refused(&r, dup_fd, 65536, E, "same memory as pool 0", "the same memfd again");
  /* Descriptors past the pool's end: its bytes are not there (a memfd smaller than claimed). */
  segops_ring_request q = nh_sum_request(10000, 10, 0, 40960, 61440);
  nh_raw_submit(&r, 0, &q, 1);
  segops_ring_answer a;
  NH_CHECK(nh_raw_wait(&r, 0, 10, &a) && a.status == E && strstr(a.message, "outside pool 0"),
           "a tensor past the pool: %d %s", a.status, a.message);
  q = nh_sum_request(10, 2, 0, 4096, 8192 + 8); /* output not 64-byte aligned */
  nh_raw_submit(&r, 1, &q, 2);
  NH_CHECK(nh_raw_wait(&r, 1, 10, &a) && a.status == E && strstr(a.message, "aligned"), "misaligned output: %s",
           a.message);
  q = nh_sum_request(10, 2, 0, 4096, 0); /* output over x */
  nh_raw_submit(&r, 2, &q, 3);
  NH_CHECK(nh_raw_wait(&r, 2, 10, &a) && a.status == E && strstr(a.message, "overlaps input x"),
           "an output over its input: %s", a.message);
  q = nh_sum_request(10, 2, 0, 4096, 8192);
  q.in[0].pool = 7;
  nh_raw_submit(&r, 3, &q, 4);
  NH_CHECK(nh_raw_wait(&r, 3, 10, &a) && a.status == E && strstr(a.message, "pool 7"), "an unknown pool: %s",
           a.message);
  q = nh_sum_request(10, 2, 0, 4096, 8192);
  q.fn = 99;
  nh_raw_submit(&r, 4, &q, 5);
  NH_CHECK(nh_raw_wait(&r, 4, 10, &a) && a.status == E && strstr(a.message, "function id 99"), "function 99: %s",
           a.message);
  q = nh_sum_request(10, 2, 0, 4096, 8192);
  nh_raw_submit(&r, 5, &q, 6);
  NH_CHECK(nh_raw_wait(&r, 5, 10, &a) && a.status == SEGOPS_OK && a.seq == 6, "a good call at the end: %s", a.message);
  int fds[] = {unsealed, pfd[0], pfd[1], plain, named, good_fd, ro, wsealed, big, dup_fd};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) close(fds[i]);
  unlink(path);
  nh_raw_close(&r);
  end();
}

/* ---- a client that floods its ring and its doorbell ---- */

typedef struct {
  nh_raw *r;
  volatile int stop;
} flooder;

static void *ring_bell(void *arg) {
  flooder *f = arg;
  while (!f->stop) {
    __atomic_fetch_add(&f->r->hdr->doorbell, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &f->r->hdr->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0);
  }
  return NULL;
}

static void case_flood(void) {
  if (!begin(false, NULL, NULL)) return;
  nh_raw r;
  int fd;
  unsigned char *p;
  if (raw_with_pool(&r, &fd, &p, 2000, 10)) {
    flooder f = {&r, 0};
    pthread_t th;
    pthread_create(&th, NULL, ring_bell, &f);
    /* Flooded until the good client has made 10 calls beside it (it is served, not starved), for
     * at least 0.5 s and at most 30 s. */
    double t0 = segops_client_now();
    uint64_t seq = 1;
    int before = G.done;
    while (segops_client_now() < t0 + 0.5 || (G.done - before < 10 && !G.failed && segops_client_now() < t0 + 30)) {
      for (uint32_t k = 0; k < r.slots; k++) {
        segops_ring_slot *s = nh_raw_slot(&r, k);
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) & SEGOPS_SLOT_STATE_MASK;
        if (st == SEGOPS_SLOT_SUBMITTED) continue;
        segops_ring_request q = nh_sum_request(2000, 10, 0, 512u << 10, (768u << 10) + k * 128);
        nh_raw_submit(&r, k, &q, seq++);
      }
    }
    f.stop = 1;
    pthread_join(th, NULL);
    printf("flood: %llu calls submitted in %.2f s; the good client made %d meanwhile\n", (unsigned long long)seq,
           segops_client_now() - t0, G.done - before);
    NH_CHECK(G.done - before >= 10, "the good client made %d calls in 30 s of flood", G.done - before);
    raw_drop(&r, fd, p);
  }
  end();
}

/* ---- a client that punches holes in its pool during calls ---- */

static void case_hole_punch(void) {
  if (!begin(false, NULL, NULL)) return;
  nh_raw r;
  int fd;
  unsigned char *p;
  if (raw_with_pool(&r, &fd, &p, 50000, 10)) {
    for (uint64_t i = 0; i < 200; i++) {
      segops_ring_request q = nh_sum_request(50000, 10, 0, 512u << 10, 768u << 10);
      nh_raw_submit(&r, (uint32_t)(i % 4), &q, i + 1);
      off_t at = (off_t)((i * 4096 * 7) % POOL_BYTES);
      fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, at, 4096 * 3);
      segops_ring_answer a;
      NH_CHECK(nh_raw_wait(&r, (uint32_t)(i % 4), 10, &a), "no answer with holes punched");
    }
    raw_drop(&r, fd, p);
  }
  end();
}

/* ---- broken handshakes ---- */

static int raw_connect(void) {
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {0};
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%.107s", D.sock);
  NH_CHECK(connect(s, (struct sockaddr *)&sa, sizeof sa) == 0, "connect");
  return s;
}

/* Sends msg (with fd) on a new connection and expects an ERROR whose message holds want. */
static void bad_first(const void *msg, size_t len, int fd, const char *want, const char *what) {
  int s = raw_connect();
  nh_send(s, msg, len, fd);
  segops_msg_error e;
  ssize_t n = nh_recv(s, &e, sizeof e, 10);
  NH_CHECK(n == (ssize_t)sizeof e && e.h.type == SEGOPS_MSG_ERROR && strstr(e.message, want), "%s: %s", what,
           n == (ssize_t)sizeof e ? e.message : "no ERROR");
  close(s);
}

static void bad_ring(uint32_t slots, size_t bytes, bool bad_magic, const char *want, const char *what) {
  int s = raw_connect();
  segops_msg_hello h;
  memset(&h, 0, sizeof h);
  h.h = (segops_msg_head){SEGOPS_MSG_MAGIC, SEGOPS_NATIVE_VERSION, SEGOPS_MSG_HELLO, sizeof h};
  nh_send(s, &h, sizeof h, -1);
  char buf[SEGOPS_MSG_MAX];
  nh_recv(s, buf, sizeof buf, 10);
  int fd = nh_memfd(bytes, true);
  segops_ring_header *hdr = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  *hdr = (segops_ring_header){.magic = bad_magic ? 1 : SEGOPS_RING_MAGIC,
                              .version = SEGOPS_NATIVE_VERSION,
                              .slot_count = slots,
                              .slot_bytes = SEGOPS_RING_SLOT_BYTES,
                              .header_bytes = SEGOPS_RING_HEADER_BYTES};
  munmap(hdr, bytes);
  segops_msg_ring m;
  memset(&m, 0, sizeof m);
  m.h = (segops_msg_head){SEGOPS_MSG_MAGIC, SEGOPS_NATIVE_VERSION, SEGOPS_MSG_RING, sizeof m};
  m.slot_count = slots;
  nh_send(s, &m, sizeof m, fd);
  close(fd);
  segops_msg_error e;
  ssize_t n = nh_recv(s, &e, sizeof e, 10);
  NH_CHECK(n == (ssize_t)sizeof e && e.h.type == SEGOPS_MSG_ERROR && strstr(e.message, want), "%s: %s", what,
           n == (ssize_t)sizeof e ? e.message : "no ERROR");
  close(s);
}

static void case_bad_handshake(void) {
  if (!begin(false, NULL, NULL)) return;
  char junk[300];
  uint64_t seed = 5;
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)nh_rand(&seed);
  bad_first(junk, sizeof junk, -1, "bad magic", "garbage");
  segops_msg_hello h;
  memset(&h, 0, sizeof h);
  h.h = (segops_msg_head){SEGOPS_MSG_MAGIC, SEGOPS_NATIVE_VERSION, SEGOPS_MSG_HELLO, sizeof h};
  int pfd[2];
  NH_CHECK(pipe(pfd) == 0, "pipe");
  bad_first(&h, sizeof h, pfd[0], "HELLO", "a HELLO carrying a descriptor");
  bad_first(&h, sizeof h - 1, -1, "its head says", "a short HELLO");
  segops_msg_ring m;
  memset(&m, 0, sizeof m);
  m.h = (segops_msg_head){SEGOPS_MSG_MAGIC, SEGOPS_NATIVE_VERSION, SEGOPS_MSG_RING, sizeof m};
  bad_first(&m, sizeof m, -1, "HELLO", "a RING first");
  h.token_len = 5000;
  bad_first(&h, sizeof h, -1, "HELLO", "a token longer than its field");
  bad_ring(0, 4096, false, "slot count 0", "no slots");
  bad_ring(100000, 4096, false, "slot count 100000", "too many slots");
  bad_ring(8, 4096, false, "8 slots need", "a ring smaller than its slots");
  bad_ring(8, (size_t)SEGOPS_RING_BYTES(8), true, "header", "a ring with a bad header");
  for (int i = 0; i < 20; i++) close(raw_connect()); /* connect and go */
  close(pfd[0]);
  close(pfd[1]);
  end();
}

/* ---- the per-user limit ---- */

static void case_user_limit(void) {
  const char *args[] = {"--native-max-channels-per-uid", "3", NULL};
  if (!begin(false, args, NULL)) return; /* the good client holds one */
  nh_raw r[3];
  char msg[512];
  NH_CHECK(nh_raw_open(&r[0], D.sock, NULL, 4, msg) == 0, "second channel: %s", msg);
  NH_CHECK(nh_raw_open(&r[1], D.sock, NULL, 4, msg) == 0, "third channel: %s", msg);
  int rc = nh_raw_open(&r[2], D.sock, NULL, 4, msg);
  NH_CHECK(rc == SEGOPS_E_RESOURCE_EXHAUSTED && strstr(msg, "--native-max-channels-per-uid"),
           "a fourth channel of one user: %d %s", rc, msg);
  nh_raw_close(&r[2]);
  nh_raw_close(&r[1]);
  rc = SEGOPS_E_RESOURCE_EXHAUSTED;
  /* The daemon sees the close at once; the bound is for a machine that stalls. */
  for (double until = segops_client_now() + 10; rc == SEGOPS_E_RESOURCE_EXHAUSTED && segops_client_now() < until;) {
    nh_sleep(0.005);
    rc = nh_raw_open(&r[1], D.sock, NULL, 4, msg);
    if (rc) nh_raw_close(&r[1]);
  }
  NH_CHECK(rc == 0, "a channel once one closed: %s", msg);
  nh_raw_close(&r[1]);
  nh_raw_close(&r[0]);
  end();
}

static const struct {
  const char *name;
  void (*fn)(void);
} CASES[] = {
    {"die_mid_call", case_die_mid_call}, {"close_socket", case_close_socket},   {"corrupt_ring", case_corrupt_ring},
    {"rewrite_idx", case_rewrite_idx},   {"bad_memory", case_bad_memory},       {"flood", case_flood},
    {"hole_punch", case_hole_punch},     {"bad_handshake", case_bad_handshake}, {"user_limit", case_user_limit}};

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  for (size_t k = 0; argc == 2 && k < sizeof CASES / sizeof CASES[0]; k++) {
    if (strcmp(argv[1], CASES[k].name)) continue;
    nh_tempdir(DIR_, sizeof DIR_);
    MEM = segops_mem_new();
    if (!MEM) nh_skip("no memfds here");
    CASES[k].fn();
    if (G.t) end();
    if (D.pid > 0) nh_daemon_stop(&D, SIGTERM);
    segops_mem_free_all(MEM);
    if (!getenv("NH_KEEP")) nh_rmtree(DIR_);
    char name[64];
    snprintf(name, sizeof name, "native_hostile_%s", argv[1]);
    return nh_exit(name);
  }
  fprintf(stderr, "usage: %s CASE\n", argv[0]);
  return 2;
}
