/* shm_body.h: parsing the shared-memory registration body {"key", "offset", "byte_size"}. */
#ifndef SEGOPS_SHM_BODY_H
#define SEGOPS_SHM_BODY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  json_t *root; /* owns key */
  const char *key;
  size_t key_len;
  uint64_t offset, byte_size;
} segops_shm_reg_body;

/* Parses and checks the body (a JSON object with exactly those keys; offset optional, default 0)
 * of region `name`'s registration. Returns SEGOPS_OK (free *out with segops_shm_reg_body_free)
 * or SEGOPS_E_INVALID_ARGUMENT with a message naming the region and the rule. The key and the
 * sizes are checked against the object by segops_shm_register. */
int segops_shm_parse_register(const char *body, size_t len, const char *name, segops_shm_reg_body *out, char *err,
                              size_t errlen);
void segops_shm_reg_body_free(segops_shm_reg_body *b);

#endif
