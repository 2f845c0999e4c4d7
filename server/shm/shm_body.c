/* shm_body.c: the body of POST /v2/systemsharedmemory/region/{name}/register, parsed and checked
 * apart from HTTP (the fuzz target tests/fuzz/fuzz_shm.c drives it directly). */
#include "shm_body.h"

#include <stdio.h>
#include <string.h>

#include "errors.h"

int segops_shm_parse_register(const char *body, size_t len, const char *name, segops_shm_reg_body *out, char *err,
                              size_t errlen) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
  if (!root || !json_is_object(root)) {
    json_decref(root);
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                       "register '%s': the body must be a JSON object {\"key\": \"/name\", \"offset\": n, "
                       "\"byte_size\": n}",
                       name);
  }
  json_t *key = NULL, *off = NULL, *size = NULL;
  const char *k;
  json_t *v;
  json_object_foreach(root, k, v) {
    json_t **slot = !strcmp(k, "key") ? &key : !strcmp(k, "offset") ? &off : !strcmp(k, "byte_size") ? &size : NULL;
    if (!slot) {
      json_decref(root);
      return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen,
                         "register '%s': unknown key in the body (expected key, offset, byte_size)", name);
    }
    *slot = v;
  }
  const char *bad =
      !key || !json_is_string(key)                                      ? "\"key\" must be a string such as \"/name\""
      : off && (!json_is_integer(off) || json_integer_value(off) < 0)   ? "\"offset\" must be an integer >= 0"
      : !size || !json_is_integer(size) || json_integer_value(size) < 0 ? "\"byte_size\" must be an integer >= 1"
                                                                        : NULL;
  if (bad) {
    json_decref(root);
    return segops_errf(SEGOPS_E_INVALID_ARGUMENT, err, errlen, "register '%s': %s", name, bad);
  }
  out->root = root;
  out->key = json_string_value(key);
  out->key_len = json_string_length(key);
  out->offset = off ? (uint64_t)json_integer_value(off) : 0;
  out->byte_size = (uint64_t)json_integer_value(size);
  return SEGOPS_OK;
}

void segops_shm_reg_body_free(segops_shm_reg_body *b) {
  json_decref(b->root);
  memset(b, 0, sizeof *b);
}
