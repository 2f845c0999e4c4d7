/* log.c: leveled logging to stderr. Each message is formatted whole and written with one
 * write() so lines from different threads never interleave. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int segops_log_level = SEGOPS_LOG_INFO;

static const char *const NAMES[] = {"error", "warn", "info", "debug"};

int segops_log_parse(const char *s) {
  for (int i = 0; i < 4; i++)
    if (strcmp(s, NAMES[i]) == 0) return i;
  if (strcmp(s, "warning") == 0) return SEGOPS_LOG_WARN;
  return -1;
}

const char *segops_log_name(int level) { return level >= 0 && level < 4 ? NAMES[level] : "?"; }

void segops_log(int level, const char *fmt, ...) {
  if (level > segops_log_level) return;
  char line[1024];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  int o =
      snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ segopsd %s: ", tm.tm_year + 1900, tm.tm_mon + 1,
               tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L, segops_log_name(level));
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line + o, sizeof line - (size_t)o - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)o + (n < 0 ? 0 : (size_t)n);
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w; /* nothing sensible to do when stderr is gone */
}
