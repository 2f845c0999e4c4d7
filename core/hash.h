/* hash.h: a 128-bit keyed hash of bytes, with one random key per process, used to recognise an
 * idx seen before (the validated-idx cache in prepare, the CUDA layout cache). Not
 * cryptographic: its key is never revealed, so a client cannot aim for a collision. */
#ifndef SEGOPS_HASH_H
#define SEGOPS_HASH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The hash of len bytes at p under seed. */
void segops_hash128(const void *p, size_t len, const uint64_t seed[2], uint64_t out[2]);

/* This process's key (random, made on first use; thread-safe). */
const uint64_t *segops_hash_seed(void);

/* segops_hash128 under this process's key. */
void segops_hash_idx(const void *p, size_t len, uint64_t out[2]);

/* segops_hash_idx of the int64 idx whose values are v's n int32 values (the bytes an int64 idx
 * had when it was narrowed into v), computed from v. */
void segops_hash_idx_widened(const int32_t *v, int64_t n, uint64_t out[2]);

#ifdef __cplusplus
}
#endif

#endif
