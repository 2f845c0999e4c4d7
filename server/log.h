/* log.h: leveled logging to stderr for the daemon (one line per message, thread-safe). */
#ifndef SEGOPS_LOG_H
#define SEGOPS_LOG_H

enum { SEGOPS_LOG_ERROR = 0, SEGOPS_LOG_WARN = 1, SEGOPS_LOG_INFO = 2, SEGOPS_LOG_DEBUG = 3 };

/* Current threshold: messages above it are dropped. Set once at startup. */
extern int segops_log_level;

/* Parses "error", "warn", "info", "debug"; returns the level or -1. */
int segops_log_parse(const char *s);
const char *segops_log_name(int level);

void segops_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define SEGOPS_LOGE(...) segops_log(SEGOPS_LOG_ERROR, __VA_ARGS__)
#define SEGOPS_LOGW(...) segops_log(SEGOPS_LOG_WARN, __VA_ARGS__)
#define SEGOPS_LOGI(...) segops_log(SEGOPS_LOG_INFO, __VA_ARGS__)
#define SEGOPS_LOGD(...)                                                                 \
  do {                                                                                   \
    if (segops_log_level >= SEGOPS_LOG_DEBUG) segops_log(SEGOPS_LOG_DEBUG, __VA_ARGS__); \
  } while (0)

#endif
