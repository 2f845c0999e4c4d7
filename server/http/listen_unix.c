/* listen_unix.c: unix-domain listening sockets (see listen_unix.h). */
#include "listen_unix.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int fill_addr(struct sockaddr_un *sa, const char *path) {
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof sa->sun_path) return -1;
  memcpy(sa->sun_path, path, n);
  return 0;
}

/* 1: a process accepts on path; 0: nobody does (stale file); -1: cannot tell (errno). (A socket of
 * another type answers EPROTOTYPE: cannot tell.) */
static int someone_listens(const struct sockaddr_un *sa, int type) {
  int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int rc = connect(fd, (const struct sockaddr *)sa, sizeof *sa);
  int e = errno;
  close(fd);
  if (rc == 0) return 1;
  if (e == ECONNREFUSED || e == ENOENT) return 0;
  errno = e;
  return e == EAGAIN ? 1 : -1; /* EAGAIN: a live listener with a full backlog */
}

int segops_unix_listen(const char *path, unsigned mode, unsigned long long *dev, unsigned long long *ino, char *err,
                       size_t errlen) {
  return segops_unix_listen_type(path, SOCK_STREAM, mode, dev, ino, err, errlen);
}

int segops_unix_listen_type(const char *path, int type, unsigned mode, unsigned long long *dev, unsigned long long *ino,
                            char *err, size_t errlen) {
  struct sockaddr_un sa;
  if (fill_addr(&sa, path)) {
    snprintf(err, errlen, "unix socket path '%.200s' is empty or longer than %zu bytes", path, sizeof sa.sun_path - 1);
    return -1;
  }
  struct stat st;
  if (lstat(path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      snprintf(err, errlen, "unix:%.200s exists and is not a socket; refusing to replace it", path);
      return -1;
    }
    int live = someone_listens(&sa, type);
    if (live == 1) {
      snprintf(err, errlen, "unix:%.200s: another process is listening on it", path);
      return -1;
    }
    if (live < 0) {
      snprintf(err, errlen, "unix:%.200s: cannot probe the existing socket: %s", path, strerror(errno));
      return -1;
    }
    if (unlink(path) != 0 && errno != ENOENT) { /* stale: left by a process that died */
      snprintf(err, errlen, "unix:%.200s: cannot remove the stale socket: %s", path, strerror(errno));
      return -1;
    }
  }
  int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    snprintf(err, errlen, "unix:%.200s: socket: %s", path, strerror(errno));
    return -1;
  }
  /* The file gets its mode as bind creates it, from the umask: no chmod after, which would follow
   * a symlink put in its place meanwhile. The umask is the process's: this runs at start, and no
   * other thread creates files. */
  mode_t saved = umask((mode_t)(~mode & 0777));
  int b = bind(fd, (struct sockaddr *)&sa, sizeof sa);
  int e = errno;
  umask(saved);
  if (b != 0) {
    snprintf(err, errlen, "unix:%.200s: bind: %s", path, strerror(e));
    close(fd);
    return -1;
  }
  errno = 0;
  bool ours = lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
  if (!ours || listen(fd, 1024) != 0) {
    snprintf(err, errlen, "unix:%.200s: %s", path, errno ? strerror(errno) : "not the socket just bound");
    close(fd);
    if (ours) unlink(path);
    return -1;
  }
  *dev = (unsigned long long)st.st_dev;
  *ino = (unsigned long long)st.st_ino;
  return fd;
}

void segops_unix_unlink(const char *path, unsigned long long dev, unsigned long long ino) {
  struct stat st;
  if (!path[0] || lstat(path, &st) != 0) return;
  if (S_ISSOCK(st.st_mode) && (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino)
    unlink(path);
}
