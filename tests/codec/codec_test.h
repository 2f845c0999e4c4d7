/* codec_test.h: tiny assertion helpers and msgpack body builders shared by the codec tests. */
#ifndef SEGOPS_CODEC_TEST_H
#define SEGOPS_CODEC_TEST_H

#include <msgpack.h>
#include <stdio.h>
#include <string.h>

#include "codec.h"
#include "errors.h"

static int g_failures;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      g_failures++;                                                            \
    }                                                                          \
  } while (0)

/* Checks an error: the code and a substring of the message. */
#define CHECK_ERR(rc, code, err, sub)                                                               \
  do {                                                                                              \
    int rc_ = (rc);                                                                                 \
    if (rc_ != (code) || !strstr((err), (sub))) {                                                   \
      fprintf(stderr, "%s:%d: expected %s containing \"%s\", got %s: \"%s\"\n", __FILE__, __LINE__, \
              segops_err_code(code), (sub), segops_err_code(rc_), (err));                           \
      g_failures++;                                                                                 \
    }                                                                                               \
  } while (0)

static inline int test_result(const char *name) {
  if (g_failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, g_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

static inline void pk_str(msgpack_packer *pk, const char *s) {
  msgpack_pack_str(pk, strlen(s));
  msgpack_pack_str_body(pk, s, strlen(s));
}

/* Packs "name": {"dtype": dt, "shape": [...], "data": bin}. */
static inline void pk_tensor(msgpack_packer *pk, const char *name, const char *dt, int ndim, const long long *shape,
                             const void *data, size_t nbytes) {
  pk_str(pk, name);
  msgpack_pack_map(pk, 3);
  pk_str(pk, "dtype");
  pk_str(pk, dt);
  pk_str(pk, "shape");
  msgpack_pack_array(pk, (size_t)ndim);
  for (int i = 0; i < ndim; i++) msgpack_pack_long_long(pk, shape[i]);
  pk_str(pk, "data");
  msgpack_pack_bin(pk, nbytes);
  msgpack_pack_bin_body(pk, data, nbytes);
}

#endif
