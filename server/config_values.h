/* config_values.h: the parsers and printers of segopsd's composite setting values (config_values.c),
 * which the rows of config.c name: listen addresses, devices, the token and its file, the socket
 * mode, the log level, the native socket. A parser takes the configuration (base), the value, and
 * whether it appends (repeated options), and returns 0, or -1 with err set or left for the table's
 * generic message; a printer writes the value as --help and /v1/info show it. */
#ifndef SEGOPS_CONFIG_VALUES_H
#define SEGOPS_CONFIG_VALUES_H

#include <stdbool.h>
#include <stddef.h>

int segops_cfg_parse_listen(void *base, const char *s, int append, char *err, size_t errlen);
int segops_cfg_parse_devices(void *base, const char *s, int append, char *err, size_t errlen);
int segops_cfg_parse_token_file(void *base, const char *v, int append, char *err, size_t errlen);
int segops_cfg_parse_token(void *base, const char *v, int append, char *err, size_t errlen);
int segops_cfg_parse_socket_mode(void *base, const char *v, int append, char *err, size_t errlen);
int segops_cfg_parse_log_level(void *base, const char *v, int append, char *err, size_t errlen);
const char *segops_cfg_format_listen(const void *base, char *buf, size_t len);
const char *segops_cfg_format_devices(const void *base, char *buf, size_t len);
const char *segops_cfg_format_socket_mode(const void *base, char *buf, size_t len);
const char *segops_cfg_format_token_file(const void *base, char *buf, size_t len);
const char *segops_cfg_format_token(const void *base, char *buf, size_t len);
bool segops_cfg_listen_is_loopback(const char *host);
int segops_cfg_parse_native_socket(void *base, const char *v, int append, char *err, size_t errlen);
const char *segops_cfg_format_native_socket(const void *base, char *buf, size_t len);

#endif
