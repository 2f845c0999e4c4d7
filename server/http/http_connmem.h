/* http_connmem.h: libmicrohttpd's memory per connection, shared by segopsd and the service
 * benchmark's echo (bench/http/echo_server.c), so the floor runs with the daemon's setting. It
 * holds the connection's read buffer (how much of a body one read takes in) and the request
 * head, and libmicrohttpd clears it between requests on a connection.
 * SEGOPS_HTTP_CONNECTION_MEMORY (k/M suffixes, 16 KiB to 16 MiB), default 64 KiB. */
#ifndef SEGOPS_HTTP_CONNMEM_H
#define SEGOPS_HTTP_CONNMEM_H

#include <stddef.h>

#include "backend.h" /* segops_env_bytes */

static inline size_t segops_http_connection_memory(void) {
  size_t v = segops_env_bytes("SEGOPS_HTTP_CONNECTION_MEMORY", (size_t)64 << 10);
  if (v < ((size_t)16 << 10)) v = (size_t)16 << 10;
  if (v > ((size_t)16 << 20)) v = (size_t)16 << 20;
  return v;
}

#endif
