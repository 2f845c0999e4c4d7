/* test_native_mem.c: the client's shared memory (clients/c/src/mem.c): memfd pools sealed against
 * shrinking and fully allocated, 64-byte alignment, locate, pool sizes flat over 10^5
 * allocate/free cycles, and a forked child that never allocates its parent's bytes. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "native_harness.h"

static size_t pool_bytes(segops_mem *m) {
  size_t total = 0;
  for (int k = 0; k < segops_mem_pool_count(m); k++) {
    size_t sz = 0;
    segops_mem_pool_fd(m, k, &sz);
    total += sz;
  }
  return total;
}

static void pools_sealed_and_allocated(segops_mem *m) {
  for (int k = 0; k < segops_mem_pool_count(m); k++) {
    size_t sz = 0;
    int fd = segops_mem_pool_fd(m, k, &sz);
    struct stat st;
    NH_CHECK(fd >= 0 && fstat(fd, &st) == 0 && (size_t)st.st_size == sz, "pool %d: fd and size", k);
    NH_CHECK((fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK) != 0, "pool %d is not sealed against shrinking", k);
    NH_CHECK((size_t)st.st_blocks * 512 >= sz, "pool %d is not fully allocated (%lld of %zu bytes)", k,
             (long long)st.st_blocks * 512, sz);
  }
}

int main(void) {
  segops_mem *m = segops_mem_new();
  if (!m) nh_skip("no memfds here");
  /* alignment and locate */
  void *ps[64];
  for (int i = 0; i < 64; i++) {
    size_t n = (size_t)(i * 37 + 1);
    ps[i] = segops_mem_alloc(m, n);
    NH_CHECK(ps[i] && ((uintptr_t)ps[i] & 63u) == 0, "allocation %d (%zu bytes) not 64-byte aligned", i, n);
    uint32_t pool;
    uint64_t off;
    NH_CHECK(segops_mem_locate(m, ps[i], n, &pool, &off) && off % 64 == 0, "allocation %d not located", i);
    memset(ps[i], 0xab, n);
  }
  int heap = 0;
  uint32_t pool;
  uint64_t off;
  NH_CHECK(!segops_mem_locate(m, &heap, sizeof heap, &pool, &off), "a stack variable located in a pool");
  size_t sz0 = 0;
  segops_mem_pool_fd(m, 0, &sz0);
  NH_CHECK(!segops_mem_locate(m, (char *)ps[0] - 64 + sz0, 128, &pool, &off) || sz0 < 64, "a range past the pool");
  for (int i = 0; i < 64; i++) segops_mem_release(m, ps[i]);
  /* 10^5 cycles of a training step's allocations: the pools stay as they are after the first */
  uint64_t seed = 1;
  static const size_t SIZES[] = {24, 8192, 3 * 8 * 1024, 1 << 16, 3 * 8 * (1 << 14), 100, 1 << 20};
  int count = 0;
  size_t bytes = 0;
  for (int cycle = 0; cycle < 100000; cycle++) {
    void *live[8];
    int n = 0;
    for (size_t k = 0; k < sizeof SIZES / sizeof SIZES[0]; k++)
      if (nh_rand(&seed) % 4) live[n++] = segops_mem_alloc(m, SIZES[k] + nh_rand(&seed) % 64);
    for (int i = 0; i < n; i++) {
      int j = (int)(nh_rand(&seed) % (uint64_t)n); /* freed in any order */
      void *t = live[i];
      live[i] = live[j];
      live[j] = t;
    }
    for (int i = 0; i < n; i++) {
      NH_CHECK(live[i] != NULL, "cycle %d: allocation failed", cycle);
      segops_mem_release(m, live[i]);
    }
    if (cycle == 10) count = segops_mem_pool_count(m), bytes = pool_bytes(m);
  }
  NH_CHECK(segops_mem_pool_count(m) == count && pool_bytes(m) == bytes,
           "pools grew over 10^5 cycles: %d pools / %zu bytes after 10 cycles, %d / %zu after", count, bytes,
           segops_mem_pool_count(m), pool_bytes(m));
  printf("10^5 cycles: %d pool(s), %zu bytes\n", segops_mem_pool_count(m), pool_bytes(m));
  pools_sealed_and_allocated(m);
  /* a fork: the child allocates in pools of its own, never in its parent's (shared) bytes */
  void *parent = segops_mem_alloc(m, 4096);
  int before = segops_mem_pool_count(m);
  pid_t pid = fork();
  if (pid == 0) {
    void *c = segops_mem_alloc(m, 4096);
    uint32_t cp = 0;
    uint64_t co;
    int ok = c && segops_mem_locate(m, c, 4096, &cp, &co) && (int)cp >= before;
    ok = ok && segops_mem_locate(m, parent, 4096, &cp, &co); /* the parent's bytes are still readable here */
    segops_mem_release(m, parent);                           /* the parent's: ignored here */
    _exit(ok ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  NH_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forked child allocated in its parent's pools");
  NH_CHECK(segops_mem_pool_count(m) == before, "the child's pools showed in the parent");
  segops_mem_release(m, parent);
  segops_mem_free_all(m);
  return nh_exit("native_mem");
}
