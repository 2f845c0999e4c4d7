/* fuzz_shm.c: libFuzzer target for the shared-memory surface: the registration body parser and
 * the registry's name, key, offset and size checks on registration and on every use, the
 * ownership and access rules, and overlaps judged on the object. At start it creates one POSIX shm
 * object of 64 KiB (its own, 0600, /segops-fuzz-<pid>, unlinked at exit) and registers it as
 * region "base" for its own uid. Byte 0 picks the mode; bit 1 makes the caller a foreign uid (one
 * that neither owns the object nor registered "base"):
 *   bit 0 clear: the rest is a registration body for region "f": parsed; when valid and its key
 *      is "/segops-fuzz-self" (which stands for the target's own object), registered, looked up,
 *      used and unregistered (a foreign uid is refused: the object is not its to share, and it
 *      sees, unregisters and uses none of ours); other keys are only checked, never opened (the
 *      fuzzer must not map other processes' memory);
 *   bit 0 set, bit 2 clear: the rest is "<region name>\0" then offset and size (8 bytes
 *      little-endian each): one use of those bytes of that region, whose first and last byte are
 *      read (ASan checks them); any name but ours is shm_region_unknown;
 *   bit 0 and bit 2 set: the rest is five u64: the object is registered again as "alias" from
 *      offset A, then bytes [o1, o1+l1) of "base" and [o2, o2+l2) of "alias" are taken: they must
 *      overlap exactly when their object ranges do, whatever the addresses. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "shm.h"
#include "shm_body.h"

#define OBJ_BYTES 65536
static segops_shm *reg;
static char own_key[64];
static int64_t own_uid, foreign_uid;
#define SELF_KEY "/segops-fuzz-self"

static void cleanup(void) {
  segops_shm_free(reg);
  shm_unlink(own_key);
}

static void setup(void) {
  snprintf(own_key, sizeof own_key, "/segops-fuzz-%d", (int)getpid());
  int fd = shm_open(own_key, O_RDWR | O_CREAT | O_EXCL, 0600);
  FUZZ_ASSERT(fd >= 0 && ftruncate(fd, OBJ_BYTES) == 0);
  close(fd);
  reg = segops_shm_new(1 << 20, NULL);
  FUZZ_ASSERT(reg != NULL);
  own_uid = (int64_t)getuid();
  foreign_uid = own_uid == 4242 ? 4243 : 4242;
  char err[256];
  FUZZ_ASSERT(segops_shm_register(reg, own_uid, "base", 4, own_key, strlen(own_key), 0, OBJ_BYTES, err, sizeof err) ==
              0);
  atexit(cleanup);
}

static uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void use(int64_t uid, const char *name, size_t name_len, uint64_t off, uint64_t size) {
  segops_shm_ref ref;
  memset(&ref, 0, sizeof ref);
  char err[256] = "";
  int rc = segops_shm_acquire(reg, uid, name, name_len, off, size, &ref, err, sizeof err);
  bool ours = uid == own_uid && ((name_len == 4 && !memcmp(name, "base", 4)) || (name_len == 1 && name[0] == 'f'));
  if (!ours) FUZZ_ASSERT(rc == SEGOPS_E_SHM_REGION_UNKNOWN); /* another's region is not there for it */
  if (rc == SEGOPS_OK) {
    FUZZ_ASSERT(ref.len == size && ref.region != NULL);
    if (size) {
      volatile unsigned char sink = ((unsigned char *)ref.ptr)[0];
      sink ^= ((unsigned char *)ref.ptr)[size - 1];
      (void)sink;
    }
    FUZZ_ASSERT(!segops_shm_ref_damaged(&ref, false, err, sizeof err));
  } else {
    FUZZ_ASSERT(err[0] != 0 && ref.region == NULL);
  }
  segops_shm_release(&ref);
}

/* A registration body for "f", as uid. */
static void registration(int64_t uid, const uint8_t *data, size_t size) {
  char err[512] = "";
  segops_shm_reg_body b;
  int rc = segops_shm_parse_register((const char *)data, size, "f", &b, err, sizeof err);
  if (rc != SEGOPS_OK) {
    FUZZ_ASSERT(err[0] != 0 && b.root == NULL);
    return;
  }
  FUZZ_ASSERT(b.key != NULL);
  (void)segops_shm_key_ok(b.key, b.key_len);
  if (b.key_len == strlen(SELF_KEY) && memcmp(b.key, SELF_KEY, b.key_len) == 0) {
    rc = segops_shm_register(reg, uid, "f", 1, own_key, strlen(own_key), b.offset, b.byte_size, err, sizeof err);
    if (uid != own_uid) FUZZ_ASSERT(rc != SEGOPS_OK); /* the object is ours, 0600: never the foreign uid's */
    if (rc == SEGOPS_OK) {
      FUZZ_ASSERT(b.offset <= OBJ_BYTES && b.byte_size <= OBJ_BYTES - b.offset);
      segops_shm_info info[2];
      FUZZ_ASSERT(segops_shm_status(reg, uid, "f", 1, info, 2) == 1 && info[0].byte_size == b.byte_size);
      FUZZ_ASSERT(segops_shm_status(reg, foreign_uid, NULL, 0, info, 2) == 0);
      use(uid, "f", 1, 0, b.byte_size);
      use(uid, "f", 1, b.byte_size ? b.byte_size - 1 : 0, 1); /* the last byte, or past an empty region */
      use(foreign_uid, "f", 1, 0, 1);
      FUZZ_ASSERT(segops_shm_unregister(reg, foreign_uid, "f", 1, err, sizeof err) == SEGOPS_E_NOT_FOUND);
      FUZZ_ASSERT(segops_shm_unregister(reg, uid, "f", 1, err, sizeof err) == SEGOPS_OK);
    } else {
      FUZZ_ASSERT(err[0] != 0);
    }
  }
  segops_shm_reg_body_free(&b);
  segops_shm_unregister_all(reg, foreign_uid); /* never ours */
  FUZZ_ASSERT(segops_shm_registered_bytes(reg) == OBJ_BYTES);
}

/* "alias" from object offset a; base[o1, +l1) and alias[o2, +l2) overlap iff their object ranges do. */
static void aliasing(uint64_t a, uint64_t o1, uint64_t l1, uint64_t o2, uint64_t l2) {
  a %= OBJ_BYTES;
  char err[256];
  FUZZ_ASSERT(segops_shm_register(reg, own_uid, "alias", 5, own_key, strlen(own_key), a, OBJ_BYTES - a, err,
                                  sizeof err) == SEGOPS_OK);
  segops_shm_ref r1, r2;
  int rc1 = segops_shm_acquire(reg, own_uid, "base", 4, o1, l1, &r1, err, sizeof err);
  int rc2 = segops_shm_acquire(reg, own_uid, "alias", 5, o2, l2, &r2, err, sizeof err);
  if (rc1 == SEGOPS_OK && rc2 == SEGOPS_OK) {
    uint64_t x = o1, y = a + o2; /* object offsets */
    bool want = l1 && l2 && x < y + l2 && y < x + l1;
    FUZZ_ASSERT(segops_shm_refs_overlap(&r1, &r2) == want && segops_shm_refs_overlap(&r2, &r1) == want);
  }
  segops_shm_release(&r1);
  segops_shm_release(&r2);
  FUZZ_ASSERT(segops_shm_unregister(reg, own_uid, "alias", 5, err, sizeof err) == SEGOPS_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!reg) setup();
  if (size < 1) return 0;
  int64_t uid = (data[0] & 2) ? foreign_uid : own_uid;
  if ((data[0] & 1) == 0) {
    registration(uid, data + 1, size - 1);
    return 0;
  }
  if (data[0] & 4) {
    if (size >= 41) aliasing(le64(data + 1), le64(data + 9), le64(data + 17), le64(data + 25), le64(data + 33));
    return 0;
  }
  const uint8_t *z = memchr(data + 1, 0, size - 1);
  if (!z || (size_t)(data + size - z) < 17) return 0;
  size_t name_len = (size_t)(z - (data + 1));
  use(uid, (const char *)data + 1, name_len, le64(z + 1), le64(z + 9));
  return 0;
}
