/* hash.c: segops_hash128 and the process's key (see hash.h). */
#include "hash.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define H_P1 0x9E3779B185EBCA87ull
#define H_P2 0xC2B2AE3D27D4EB4Full
#define H_P3 0x165667B19E3779F9ull

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static uint64_t h_round(uint64_t acc, uint64_t in) { return rotl64(acc + in * H_P2, 31) * H_P1; }
static uint64_t h_fmix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

/* Four independent 64-bit lanes over 32-byte blocks (memory speed on one core), the tail word by
 * word, then two differently mixed 64-bit digests of the 256-bit state. */
/* The hash of len bytes: of b's, or (b NULL) of the little-endian int64 bytes of v's int32
 * values sign-extended (len = 8 * their count), without writing those bytes out. */
static inline uint64_t word(const unsigned char *b, const int32_t *v, size_t byte) {
  if (v) return (uint64_t)(int64_t)v[byte / 8];
  uint64_t w;
  memcpy(&w, b + byte, 8);
  return w;
}

static void hash_core(const unsigned char *b, const int32_t *v, size_t len, const uint64_t seed[2], uint64_t out[2]) {
  uint64_t v0 = seed[0] + H_P1 + H_P2, v1 = seed[0] + H_P2, v2 = seed[1], v3 = seed[1] - H_P1;
  size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    v0 = h_round(v0, word(b, v, i));
    v1 = h_round(v1, word(b, v, i + 8));
    v2 = h_round(v2, word(b, v, i + 16));
    v3 = h_round(v3, word(b, v, i + 24));
  }
  uint64_t tail = 0;
  for (int k = 0; i + 8 <= len; i += 8, k++) tail = h_round(tail ^ (uint64_t)k, word(b, v, i));
  uint64_t last = 0;
  if (i < len) memcpy(&last, b + i, len - i); /* only raw bytes have a partial word */
  tail = h_round(tail, last ^ ((uint64_t)len << 3));
  out[0] = h_fmix(rotl64(v0, 1) + rotl64(v1, 7) + rotl64(v2, 12) + rotl64(v3, 18) + tail + (uint64_t)len);
  out[1] = h_fmix((v0 ^ rotl64(v2, 29)) * H_P3 + (v1 ^ rotl64(v3, 37)) * H_P1 + rotl64(tail, 23) + seed[1]);
}

void segops_hash128(const void *p, size_t len, const uint64_t seed[2], uint64_t out[2]) {
  hash_core((const unsigned char *)p, NULL, len, seed, out);
}

static uint64_t seed[2];
static pthread_once_t seed_once = PTHREAD_ONCE_INIT;

static void make_seed(void) {
  uint64_t x = 0;
  FILE *f = fopen("/dev/urandom", "rb");
  if (f) {
    if (fread(seed, sizeof seed, 1, f) != 1) memset(seed, 0, sizeof seed);
    fclose(f);
  }
  /* Mixed with the clock and pid either way (no /dev/urandom: these alone). */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  x = ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 48) ^ (uint64_t)(uintptr_t)&x;
  seed[0] = h_fmix(seed[0] ^ (x + H_P1));
  seed[1] = h_fmix(seed[1] ^ (x + H_P3));
}

const uint64_t *segops_hash_seed(void) {
  pthread_once(&seed_once, make_seed);
  return seed;
}

void segops_hash_idx(const void *p, size_t len, uint64_t out[2]) { segops_hash128(p, len, segops_hash_seed(), out); }

void segops_hash_idx_widened(const int32_t *v, int64_t n, uint64_t out[2]) {
  hash_core(NULL, v, (size_t)n * 8, segops_hash_seed(), out);
}
