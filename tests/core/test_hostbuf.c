/* test_hostbuf.c: the pool of large host buffers (core/hostbuf.c): reuse by size class, the
 * cap on mapped bytes (heap past it, idle buffers of other sizes unmapped to make room), pinning
 * through a backend's host_register and unpinning on detach, alignment, many threads at once. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hostbuf.h"
#include "test_util.h"

#define MiB ((size_t)1 << 20)

/* A backend that only counts (un)registrations of the ranges handed to it. */
static int regs, unregs;
static size_t reg_bytes;
static void *last_reg;
static int fake_register(void *ctx, void *p, size_t len) {
  (void)ctx;
  regs++;
  reg_bytes += len;
  last_reg = p;
  return 0;
}
static void fake_unregister(void *ctx, void *p) {
  (void)ctx;
  (void)p;
  unregs++;
}

static segops_hostbuf_stats_t st(void) {
  segops_hostbuf_stats_t s;
  segops_hostbuf_stats(&s);
  return s;
}

static void *worker(void *arg) {
  uintptr_t seed = (uintptr_t)arg;
  for (int i = 0; i < 200; i++) {
    size_t n = (i + seed) % 3 == 0 ? 1000 : (1 + (i + seed) % 4) * MiB;
    unsigned char *p = segops_hostbuf_alloc(n);
    if (!p) return (void *)1;
    memset(p, (int)(seed & 0xff), n);
    for (size_t k = 0; k < n; k += 4096)
      if (p[k] != (unsigned char)(seed & 0xff)) return (void *)1;
    segops_hostbuf_free(p);
  }
  return NULL;
}

int main(void) {
  segops_hostbuf_set_cap(8 * MiB);

  /* Small: heap, not counted by the pool; aligned. */
  void *s = segops_hostbuf_alloc(100);
  TU_CHECK(s && ((uintptr_t)s & 63) == 0, "small buffer not 64-byte aligned");
  TU_CHECK(st().mapped == 0 && st().mapped_new == 0, "a small buffer was mapped by the pool");
  segops_hostbuf_free(s);
  segops_hostbuf_free(NULL);

  /* Large: mapped once, then the same buffer back for the same size class. */
  unsigned char *a = segops_hostbuf_alloc(MiB + 5);
  TU_CHECK(a && ((uintptr_t)a & 63) == 0, "large buffer not 64-byte aligned");
  memset(a, 7, MiB + 5);
  segops_hostbuf_stats_t s1 = st();
  TU_CHECK(s1.mapped_new == 1 && s1.mapped >= MiB + 5 && s1.idle == 0, "first large buffer: new %llu mapped %zu",
           (unsigned long long)s1.mapped_new, s1.mapped);
  segops_hostbuf_free(a);
  TU_CHECK(st().idle == s1.mapped, "a returned buffer is not idle");
  unsigned char *b = segops_hostbuf_alloc(MiB + 100); /* same class (1.25 MiB) */
  TU_CHECK(b == a, "same size class did not reuse the idle buffer");
  TU_CHECK(st().reused == 1 && st().idle == 0, "reuse not counted");
  unsigned char *c = segops_hostbuf_alloc(3 * MiB); /* another class: a new mapping */
  TU_CHECK(c && c != b && st().mapped_new == 2, "second class not mapped anew");
  memset(c, 1, 3 * MiB);

  /* The cap: 8 MiB mapped at most. b (1.25) + c (3) in use; 4 MiB more do not fit: heap. */
  unsigned char *d = segops_hostbuf_alloc(4 * MiB);
  TU_CHECK(d && st().heap == 1 && st().mapped <= 8 * MiB, "past the cap: heap %llu mapped %zu",
           (unsigned long long)st().heap, st().mapped);
  memset(d, 2, 4 * MiB);
  segops_hostbuf_free(d);
  TU_CHECK(st().mapped <= 8 * MiB, "a heap buffer entered the pool");
  /* An idle buffer up to half as large again serves a smaller class: c (3.5 MiB mapped) for
   * 2.5 MiB (a 3 MiB class). */
  segops_hostbuf_free(c);
  unsigned char *c2 = segops_hostbuf_alloc(5 * MiB / 2);
  TU_CHECK(c2 == c && st().reused == 2 && st().idle == 0, "a larger idle buffer did not serve a smaller class");
  segops_hostbuf_free(c2);
  /* Idle buffers of other sizes make room only once they have been idle a while: c just went
   * idle, so 5 MiB (6 mapped; fits beside b only with c unmapped) comes from the heap... */
  uint64_t heap_before = st().heap;
  unsigned char *e0 = segops_hostbuf_alloc(5 * MiB);
  TU_CHECK(e0 && st().heap == heap_before + 1 && st().idle > 0, "a buffer idle for less than a second was evicted");
  segops_hostbuf_free(e0);
  /* ...and with no wait required, c is unmapped to make room. */
  segops_hostbuf_set_stale_ms(0);
  size_t before = st().mapped;
  unsigned char *e = segops_hostbuf_alloc(5 * MiB);
  segops_hostbuf_stats_t s2 = st();
  TU_CHECK(e && s2.mapped_new == 3 && s2.idle == 0 && s2.mapped <= 8 * MiB && s2.mapped != before,
           "idle buffer not evicted for a new class: mapped %zu idle %zu new %llu", s2.mapped, s2.idle,
           (unsigned long long)s2.mapped_new);
  memset(e, 3, 5 * MiB);
  segops_hostbuf_free(e);
  segops_hostbuf_free(b);
  segops_hostbuf_set_stale_ms(1000);

  /* Past SEGOPS_HOSTBUF_MAX: never pooled, whatever the cap. */
  segops_hostbuf_set_cap(1024 * MiB);
  uint64_t heap0 = st().heap;
  unsigned char *huge = segops_hostbuf_alloc(SEGOPS_HOSTBUF_MAX + 1);
  TU_CHECK(huge && ((uintptr_t)huge & 63) == 0 && st().heap == heap0 + 1 && st().mapped == 0,
           "a buffer past SEGOPS_HOSTBUF_MAX was pooled: mapped %zu", st().mapped);
  huge[SEGOPS_HOSTBUF_MAX] = 1;
  segops_hostbuf_free(huge);
  TU_CHECK(st().mapped == 0 && st().idle == 0, "a heap buffer past the maximum went idle in the pool");

  /* Pinning: buffers mapped after attach are registered with the backend, and idle ones are
   * unregistered on detach; a pinned buffer in use at detach is not kept when it comes back. */
  segops_hostbuf_set_cap(16 * MiB);
  TU_CHECK(st().mapped == 0 && st().idle == 0, "set_cap kept idle buffers");
  segops_backend fake;
  memset(&fake, 0, sizeof fake);
  fake.name = "fake";
  fake.host_register = fake_register;
  fake.host_unregister = fake_unregister;
  segops_hostbuf_attach(&fake);
  unsigned char *p1 = segops_hostbuf_alloc(2 * MiB);
  unsigned char *p2 = segops_hostbuf_alloc(2 * MiB);
  TU_CHECK(regs == 2 && st().pinned == reg_bytes, "attach: %d registrations, pinned %zu of %zu", regs, st().pinned,
           reg_bytes);
  TU_CHECK(last_reg && (unsigned char *)last_reg < p2 && p2 - (unsigned char *)last_reg < 4096,
           "the registered range does not start at the buffer's mapping");
  segops_hostbuf_free(p1);
  unsigned char *p3 = segops_hostbuf_alloc(2 * MiB);
  TU_CHECK(p3 == p1 && regs == 2, "a pinned buffer was registered again on reuse");
  segops_hostbuf_free(p3);
  segops_hostbuf_detach();
  TU_CHECK(unregs == 1 && st().idle == 0, "detach: %d unregistrations (1 idle buffer)", unregs);
  segops_hostbuf_free(p2); /* pinned by a detached backend: unmapped, not unregistered again */
  TU_CHECK(unregs == 1 && st().mapped == 0 && st().pinned == 0, "after detach: mapped %zu pinned %zu", st().mapped,
           st().pinned);
  unsigned char *p4 = segops_hostbuf_alloc(2 * MiB);
  TU_CHECK(p4 && regs == 2, "registered after detach");
  segops_hostbuf_free(p4);

  /* Off: every buffer from the heap. */
  segops_hostbuf_set_cap(0);
  unsigned char *o = segops_hostbuf_alloc(2 * MiB);
  TU_CHECK(o && st().mapped == 0, "cap 0 still maps");
  segops_hostbuf_free(o);

  /* Threads: allocations and frees of mixed sizes under a small cap, contents intact. */
  segops_hostbuf_set_cap(12 * MiB);
  pthread_t th[4];
  for (uintptr_t t = 0; t < 4; t++) pthread_create(&th[t], NULL, worker, (void *)(t + 1));
  for (int t = 0; t < 4; t++) {
    void *r = NULL;
    pthread_join(th[t], &r);
    TU_CHECK(r == NULL, "thread %d saw another's bytes or failed to allocate", t);
  }
  segops_hostbuf_stats_t s3 = st();
  TU_CHECK(s3.mapped <= 12 * MiB && s3.idle == s3.mapped, "after the threads: mapped %zu idle %zu", s3.mapped, s3.idle);
  segops_hostbuf_set_cap(0);
  TU_CHECK(st().mapped == 0, "set_cap(0) left mappings");
  return tu_summary("hostbuf");
}
