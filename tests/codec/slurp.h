/* slurp.h: reads a whole file into a NUL-terminated malloc'd buffer (for the codec test tools). */
#ifndef SEGOPS_TEST_SLURP_H
#define SEGOPS_TEST_SLURP_H

#include <stdio.h>
#include <stdlib.h>

/* Returns the file's bytes (owned, NUL-terminated) and their count in *len; NULL if unreadable. */
static inline char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (!b) {
    fclose(f);
    return NULL;
  }
  if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
  b[n] = 0;
  fclose(f);
  *len = (size_t)n;
  return b;
}

#endif
