/* segops_chan.h: the native channel's mechanics, written once for both of its ends (the daemon's
 * server/native/ and libsegops' clients/c/src/native*.c): the futex on a word of the shared ring,
 * the doorbell, a slot's address, a control message's head, and sending and receiving a message
 * with a descriptor (SCM_RIGHTS). What the bytes mean is proto/segops_ring.h's; this header only
 * moves them. Header-only (static inline), Linux, includes nothing of the tree but segops_ring.h.
 * The hostile-client tests keep writing the ring by hand from segops_ring.h: an independent
 * reading of the contract, which sharing these helpers would not be. */
#ifndef SEGOPS_CHAN_H
#define SEGOPS_CHAN_H

#include <errno.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "segops_ring.h"

/* ---- futex and doorbell ------------------------------------------------------------------------
 * The futex words live in a memfd both processes map, so the calls are shared futexes (no
 * FUTEX_PRIVATE_FLAG). A waiter checks its word and then sleeps; a waker changes the word and
 * then wakes (glibc's and the kernel documentation's order), so no wake-up is lost. */

/* Sleeps while *word == expect, at most timeout_s (< 0: no bound). 0, or -1 with errno (EAGAIN:
 * the word had moved; ETIMEDOUT; EINTR). */
static inline int segops_chan_futex_wait(uint32_t *word, uint32_t expect, double timeout_s) {
  struct timespec ts = {(time_t)timeout_s, (long)((timeout_s - (double)(time_t)timeout_s) * 1e9)};
  return (int)syscall(SYS_futex, word, FUTEX_WAIT, expect, timeout_s < 0 ? NULL : &ts, NULL, 0);
}

/* Wakes at most n sleepers on word. */
static inline void segops_chan_futex_wake(uint32_t *word, int n) {
  syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* One pause of a spinning wait. */
static inline void segops_chan_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Rings the daemon's doorbell after a submission (or a control message): the count moves, then
 * the daemon is woken when it said it sleeps. Dekker with the daemon's wait, which sets
 * daemon_sleeps and then reads the doorbell: both orders are sequentially consistent, so one of
 * the two sides always sees the other. */
static inline void segops_chan_ring_doorbell(segops_ring_header *h) {
  __atomic_fetch_add(&h->doorbell, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&h->daemon_sleeps, __ATOMIC_SEQ_CST)) segops_chan_futex_wake(&h->doorbell, 1);
}

/* Slot k of a ring mapped at base (its header first). */
static inline segops_ring_slot *segops_chan_slot(unsigned char *base, uint32_t k) {
  return (segops_ring_slot *)(void *)(base + SEGOPS_RING_HEADER_BYTES + (size_t)k * SEGOPS_RING_SLOT_BYTES);
}

/* ---- control messages ---------------------------------------------------------------------------- */

/* The head of a message of this version. */
static inline void segops_chan_head(segops_msg_head *h, uint32_t type, size_t size) {
  h->magic = SEGOPS_MSG_MAGIC;
  h->version = SEGOPS_NATIVE_VERSION;
  h->type = type;
  h->size = (uint32_t)size;
}

/* Sends one message of len bytes with descriptor fd (none when fd < 0). 0 when all of it went,
 * else -1 (errno). Never raises SIGPIPE. */
static inline int segops_chan_send(int sock, const void *msg, size_t len, int fd) {
  struct iovec iov = {(void *)msg, len};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } ctl;
  struct msghdr mh;
  memset(&mh, 0, sizeof mh);
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (fd >= 0) {
    memset(&ctl, 0, sizeof ctl);
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof ctl.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* Receives one message into buf (cap bytes) and at most one descriptor into *fd (-1 when none came;
 * any further ones are closed, so a peer cannot make this process hold descriptors it did not
 * expect). Descriptors arrive close-on-exec. Returns the message's bytes, 0 at the end of the
 * stream, -1 on error (errno; EMSGSIZE, with no descriptor kept, when the message or its
 * descriptors did not fit). flags: recvmsg's (MSG_DONTWAIT). */
static inline ssize_t segops_chan_recv(int sock, void *buf, size_t cap, int *fd, int flags) {
  *fd = -1;
  struct iovec iov = {buf, cap};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int) * 8)];
  } ctl;
  struct msghdr mh;
  memset(&mh, 0, sizeof mh);
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = ctl.buf;
  mh.msg_controllen = sizeof ctl.buf;
  ssize_t n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
  if (n < 0) return -1;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < nfd; i++) {
      int f;
      memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
      if (*fd < 0)
        *fd = f;
      else
        close(f);
    }
  }
  if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
    errno = EMSGSIZE;
    return -1;
  }
  return n;
}

#endif
