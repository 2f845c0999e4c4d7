/* shm_guard.c: the SIGBUS guard over client-shared mappings (see shm_guard.h). */
#include "shm_guard.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "errors.h"

_Static_assert(SEGOPS_GUARD_SLOTS == SEGOPS_GUARD_TABLE_SLOTS, "the configuration bounds the guard table");

/* Reading or writing a MAP_SHARED page beyond the end of its object raises SIGBUS, and so does
 * a page the kernel cannot provide; a client can cause either at any time. The handler looks the
 * faulting address up in a table of guarded mappings (lock-free, with a sequence count per slot
 * so a slot being rewritten is skipped), maps anonymous zero pages over the mapping from the
 * faulting page to its end, and flags it. */
typedef struct {
  atomic_uint seq; /* odd while the slot is written */
  atomic_uintptr_t base;
  atomic_size_t len;
  _Atomic(atomic_int *) flag;
} guard_slot;

static guard_slot G[SEGOPS_GUARD_SLOTS];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* slot allocation (normal context only) */
static bool g_used[SEGOPS_GUARD_SLOTS];
static struct sigaction g_prev;
static uintptr_t g_page;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_installed;

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
  uintptr_t a = (uintptr_t)si->si_addr;
  for (int k = 0; k < SEGOPS_GUARD_SLOTS; k++) {
    guard_slot *s = &G[k];
    unsigned s1 = atomic_load(&s->seq);
    if (s1 & 1u) continue;
    uintptr_t b = atomic_load(&s->base);
    size_t l = atomic_load(&s->len);
    atomic_int *f = atomic_load(&s->flag);
    if (atomic_load(&s->seq) != s1 || !b || a < b || a >= b + l) continue;
    uintptr_t page = a & ~(g_page - 1);
    if (mmap((void *)page, b + l - page, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) !=
        MAP_FAILED) {
      atomic_store(f, 1);
      return;
    }
  }
  if ((g_prev.sa_flags & SA_SIGINFO) && g_prev.sa_sigaction) {
    g_prev.sa_sigaction(sig, si, uc);
  } else if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN && g_prev.sa_handler) {
    g_prev.sa_handler(sig);
  } else {
    signal(SIGBUS, SIG_DFL); /* the access faults again and the default action applies */
  }
}

static void install(void) {
  g_page = (uintptr_t)sysconf(_SC_PAGESIZE);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  g_installed = sigaction(SIGBUS, &sa, &g_prev) == 0;
}

bool segops_guard_install(void) {
  pthread_once(&g_once, install);
  return g_installed;
}

/* The uid each used slot is held for (-1: none). */
static int64_t g_owner[SEGOPS_GUARD_SLOTS];
static int g_per_uid = SEGOPS_GUARD_SLOTS / 2;

void segops_guard_set_share(int per_uid) {
  pthread_mutex_lock(&g_mu);
  g_per_uid = per_uid < 1 ? 1 : per_uid > SEGOPS_GUARD_SLOTS ? SEGOPS_GUARD_SLOTS : per_uid;
  pthread_mutex_unlock(&g_mu);
}

int segops_guard_add(void *base, size_t len, atomic_int *flag, int64_t uid) {
  pthread_mutex_lock(&g_mu);
  int k = 0, mine = 0, first_free = -1;
  for (int j = 0; j < SEGOPS_GUARD_SLOTS; j++) {
    if (!g_used[j] && first_free < 0) first_free = j;
    if (g_used[j] && uid >= 0 && g_owner[j] == uid) mine++;
  }
  if (uid >= 0 && mine >= g_per_uid) {
    pthread_mutex_unlock(&g_mu);
    return -2;
  }
  k = first_free >= 0 ? first_free : SEGOPS_GUARD_SLOTS;
  if (k < SEGOPS_GUARD_SLOTS) {
    g_used[k] = true;
    g_owner[k] = uid;
    guard_slot *s = &G[k];
    atomic_fetch_add(&s->seq, 1);
    atomic_store(&s->flag, flag);
    atomic_store(&s->len, len);
    atomic_store(&s->base, (uintptr_t)base);
    atomic_fetch_add(&s->seq, 1);
  }
  pthread_mutex_unlock(&g_mu);
  return k < SEGOPS_GUARD_SLOTS ? k : -1;
}

int segops_guard_refusal(int why, const char *what, int64_t uid, char *err, size_t errlen) {
  if (why == -2)
    return segops_errf(SEGOPS_E_RESOURCE_EXHAUSTED, err, errlen,
                       "%s: uid %lld holds its share of the daemon's guard table already (%d mapped objects: shm "
                       "regions and native channels' rings and pools; --max-mappings-per-uid)",
                       what, (long long)uid, g_per_uid);
  return segops_errf(SEGOPS_E_RESOURCE_EXHAUSTED, err, errlen,
                     "%s: the daemon's guard table (%d mapped objects, shared by every shm region and native "
                     "channel) is full",
                     what, SEGOPS_GUARD_SLOTS);
}

void segops_guard_remove(int k) {
  if (k < 0 || k >= SEGOPS_GUARD_SLOTS) return;
  pthread_mutex_lock(&g_mu);
  guard_slot *s = &G[k];
  atomic_fetch_add(&s->seq, 1);
  atomic_store(&s->base, 0);
  atomic_store(&s->len, 0);
  atomic_store(&s->flag, NULL);
  atomic_fetch_add(&s->seq, 1);
  g_used[k] = false;
  g_owner[k] = -1;
  pthread_mutex_unlock(&g_mu);
}
