/* segops_token.h: the comparison of a client's token against the daemon's, written once for every
 * place the daemon checks one (HTTP's bearer header, the native channel's HELLO). Header-only. */
#ifndef SEGOPS_TOKEN_H
#define SEGOPS_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

/* Whether given (glen bytes) equals token (tlen bytes), in time that depends on the lengths only:
 * every byte of the longer one is visited and differences are OR-ed, so timing tells nothing of
 * how many leading bytes matched. For the daemon's checks of a client's token (the channel's
 * HELLO, HTTP's bearer header). */
static inline bool segops_token_equal(const char *given, size_t glen, const char *token, size_t tlen) {
  size_t n = glen > tlen ? glen : tlen;
  volatile unsigned char diff = (unsigned char)(glen != tlen);
  for (size_t i = 0; i < n; i++) {
    unsigned char a = i < glen ? (unsigned char)given[i] : 0;
    unsigned char b = i < tlen ? (unsigned char)token[i] : 0;
    diff |= (unsigned char)(a ^ b);
  }
  return diff == 0;
}

#endif
