/* hooks_test.c: fault injection for the HTTP tests, linked ONLY into segopsd-test (never into
 * the installed segopsd). Environment knobs, read per call:
 *   SEGOPS_TEST_FAIL_OP=op/pass   that function fails with 500 internal (injected backend error)
 *   SEGOPS_TEST_DELAY_MS=N        every backend call first sleeps N ms (fills the queue, holds
 *                                 requests in flight for the shutdown and deadline tests)
 *   SEGOPS_TEST_ANSWERED_DELAY_MS=N  a native call's channel thread sleeps N ms right after the
 *                                 answer is published (what it does after that comes late) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errors.h"
#include "scheduler.h"

int segops_test_hook_before_run(const segops_call *call, char *err, size_t errlen) {
  const char *d = getenv("SEGOPS_TEST_DELAY_MS");
  if (d && *d) {
    long ms = strtol(d, NULL, 10);
    if (ms > 0) {
      struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
      nanosleep(&ts, NULL);
    }
  }
  const char *f = getenv("SEGOPS_TEST_FAIL_OP");
  if (f && *f && call && call->fn) {
    char want[96];
    snprintf(want, sizeof want, "%s/%s", segops_op_name(call->fn->op), segops_pass_name(call->fn->pass));
    if (strcmp(f, want) == 0) return segops_errf(SEGOPS_E_INTERNAL, err, errlen, "injected backend failure (test)");
  }
  return 0;
}

bool segops_test_hook_slow_backend(void) {
  const char *d = getenv("SEGOPS_TEST_DELAY_MS");
  return d && strtol(d, NULL, 10) > 0;
}

void segops_test_hook_answered(void) {
  const char *d = getenv("SEGOPS_TEST_ANSWERED_DELAY_MS");
  long ms = d && *d ? strtol(d, NULL, 10) : 0;
  if (ms > 0) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
}

bool segops_test_hooks_enabled(void) { return true; }
