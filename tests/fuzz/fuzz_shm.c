/* fuzz_shm.c: libFuzzer target for the shared-memory surface: the registration body parser and
 * the registry's name, key, offset and size checks on registration and on every use. At start it
 * creates one POSIX shm object of 64 KiB (its own, /segops-fuzz-<pid>, unlinked at exit) and
 * registers it as region "base". Byte 0 & 1 picks the mode:
 *   0: the rest is a registration body for region "f": parsed; when valid and its key is
 *      "/segops-fuzz-self" (which stands for the target's own object), registered, looked up,
 *      used and unregistered; other keys are only checked, never opened (the fuzzer must not
 *      map other processes' memory);
 *   1: the rest is "<region name>\0" then offset and size (8 bytes little-endian each): one use
 *      of those bytes of that region, whose first and last byte are read (ASan checks them). */
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
  char err[256];
  FUZZ_ASSERT(segops_shm_register(reg, "base", 4, own_key, strlen(own_key), 0, OBJ_BYTES, err, sizeof err) == 0);
  atexit(cleanup);
}

static uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void use(const char *name, size_t name_len, uint64_t off, uint64_t size) {
  segops_shm_ref ref;
  memset(&ref, 0, sizeof ref);
  char err[256] = "";
  int rc = segops_shm_acquire(reg, name, name_len, off, size, &ref, err, sizeof err);
  if (rc == SEGOPS_OK) {
    FUZZ_ASSERT(ref.len == size && ref.region != NULL);
    if (size) {
      volatile unsigned char sink = ((unsigned char *)ref.ptr)[0];
      sink ^= ((unsigned char *)ref.ptr)[size - 1];
      (void)sink;
    }
    FUZZ_ASSERT(!segops_shm_ref_damaged(&ref, err, sizeof err));
  } else {
    FUZZ_ASSERT(err[0] != 0 && ref.region == NULL);
  }
  segops_shm_release(&ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!reg) setup();
  if (size < 1) return 0;
  char err[512] = "";
  if ((data[0] & 1) == 0) {
    segops_shm_reg_body b;
    int rc = segops_shm_parse_register((const char *)data + 1, size - 1, "f", &b, err, sizeof err);
    if (rc != SEGOPS_OK) {
      FUZZ_ASSERT(err[0] != 0 && b.root == NULL);
      return 0;
    }
    FUZZ_ASSERT(b.key != NULL);
    (void)segops_shm_key_ok(b.key, b.key_len);
    if (b.key_len == strlen(SELF_KEY) && memcmp(b.key, SELF_KEY, b.key_len) == 0) {
      rc = segops_shm_register(reg, "f", 1, own_key, strlen(own_key), b.offset, b.byte_size, err, sizeof err);
      if (rc == SEGOPS_OK) {
        FUZZ_ASSERT(b.offset <= OBJ_BYTES && b.byte_size <= OBJ_BYTES - b.offset);
        segops_shm_info info[2];
        FUZZ_ASSERT(segops_shm_status(reg, "f", 1, info, 2) == 1 && info[0].byte_size == b.byte_size);
        use("f", 1, 0, b.byte_size);
        use("f", 1, b.byte_size ? b.byte_size - 1 : 0, 1);  /* the last byte, or past an empty region */
        FUZZ_ASSERT(segops_shm_unregister(reg, "f", 1, err, sizeof err) == SEGOPS_OK);
      } else {
        FUZZ_ASSERT(err[0] != 0);
      }
    }
    segops_shm_reg_body_free(&b);
    FUZZ_ASSERT(segops_shm_registered_bytes(reg) == OBJ_BYTES);
    return 0;
  }
  const uint8_t *z = memchr(data + 1, 0, size - 1);
  if (!z || (size_t)(data + size - z) < 17) return 0;
  size_t name_len = (size_t)(z - (data + 1));
  use((const char *)data + 1, name_len, le64(z + 1), le64(z + 9));
  return 0;
}
