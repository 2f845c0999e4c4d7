/* http_connmem.h: libmicrohttpd's memory per connection, shared by segopsd and the service
 * benchmark's echo (bench/http/echo_server.c), so the floor runs with the daemon's setting. It
 * holds the connection's read buffer (how much of a body one read takes in) and the request
 * head, and libmicrohttpd clears it between requests on a connection.
 * 64 KiB: a request head fits with room to spare (a 40 KB query string is served; a 200 KB one
 * is answered 414 and the connection closed), and clearing it costs every request little. At 256
 * KiB tiny requests over 64 connections were 1.3-1.6x slower and large bodies no faster
 * (bench/http/run.sh --cases tiny,large, both sizes in one run). */
#ifndef SEGOPS_HTTP_CONNMEM_H
#define SEGOPS_HTTP_CONNMEM_H

#include <stddef.h>

#define SEGOPS_HTTP_CONNECTION_MEMORY ((size_t)64 << 10)

static inline size_t segops_http_connection_memory(void) { return SEGOPS_HTTP_CONNECTION_MEMORY; }

#endif
