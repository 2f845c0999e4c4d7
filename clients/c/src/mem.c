/* mem.c: the client's memory shared with daemons (mem.h). PLACEHOLDER until the native channel
 * lands: no pools, so every array is copied and the native channel is off. */
#include "mem.h"

#include <stddef.h>

segops_mem *segops_mem_new(void) { return NULL; }
void segops_mem_free_all(segops_mem *m) { (void)m; }
void *segops_mem_alloc(segops_mem *m, size_t nbytes) {
  (void)m;
  (void)nbytes;
  return NULL;
}
void segops_mem_release(segops_mem *m, void *p) {
  (void)m;
  (void)p;
}
bool segops_mem_locate(segops_mem *m, const void *p, size_t nbytes, uint32_t *pool, uint64_t *offset) {
  (void)m, (void)p, (void)nbytes, (void)pool, (void)offset;
  return false;
}
uint32_t segops_mem_generation(segops_mem *m) {
  (void)m;
  return 0;
}
int segops_mem_pool_count(segops_mem *m) {
  (void)m;
  return 0;
}
int segops_mem_pool_fd(segops_mem *m, int k, size_t *size) {
  (void)m, (void)k, (void)size;
  return -1;
}
