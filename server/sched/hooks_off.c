/* hooks_off.c: the test hooks of a production segopsd: none. */
#include <stddef.h>

#include "scheduler.h"

int segops_test_hook_before_run(const segops_call *call, char *err, size_t errlen) {
  (void)call, (void)err, (void)errlen;
  return 0;
}

bool segops_test_hook_slow_backend(void) { return false; }

void segops_test_hook_answered(void) {}

bool segops_test_hooks_enabled(void) { return false; }
