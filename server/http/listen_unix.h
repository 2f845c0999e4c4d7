/* listen_unix.h: unix-domain listening sockets for segopsd (--listen unix:/path): creation with
 * the configured permission bits, stale-file handling, and removal on exit. */
#ifndef SEGOPS_LISTEN_UNIX_H
#define SEGOPS_LISTEN_UNIX_H

#include <stddef.h>

/* Binds and listens on a unix socket at path with permission bits mode. A socket file left by a
 * dead process is replaced; one a live process answers on, or a path that is not a socket, is
 * refused. Returns the listening fd (non-blocking, close-on-exec) and the file's identity in
 * dev/ino, or -1 with a message in err. */
int segops_unix_listen(const char *path, unsigned mode, unsigned long long *dev, unsigned long long *ino, char *err,
                       size_t errlen);
/* The same for a socket of another type (SOCK_SEQPACKET: the native channel, server/native/). */
int segops_unix_listen_type(const char *path, int type, unsigned mode, unsigned long long *dev, unsigned long long *ino,
                            char *err, size_t errlen);
/* Removes the socket file if it is still the one segops_unix_listen created. */
void segops_unix_unlink(const char *path, unsigned long long dev, unsigned long long ino);

#endif
