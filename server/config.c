/* config.c: segopsd's rows of the configuration table (core/settings.h; the parsers of its
 * composite values are config_values.c's) and argv; the table prints --help and
 * docs/configuration.md, so the options, variables and defaults cannot drift apart. */
#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "config_values.h"
#include "log.h"

#define AT(field) offsetof(segops_config, field)
#define INT_AT(field) AT(field), sizeof(((segops_config *)0)->field)

/* The daemon's own settings, one group per section of --help and docs/configuration.md. Defaults
 * are deliberately conservative: a daemon on a shared node. */
static const segops_setting LISTEN_ROWS[] = {
    {.name = "listen",
     .env = "SEGOPS_LISTEN",
     .type = SEGOPS_SET_LIST,
     .def = "127.0.0.1:8080",
     .metavar = "ADDR[,ADDR]",
     .range_doc = "HOST:PORT, [IPv6]:PORT or unix:/absolute/path, comma-separated",
     .help = "where to serve: HOST:PORT or unix:/path/segops.sock; repeat or comma-separate to serve several; "
             "port 0 picks a free port",
     .flags = SEGOPS_SET_HOST_ONLY,
     .parse = segops_cfg_parse_listen,
     .format = segops_cfg_format_listen},
    {.name = "socket-mode",
     .env = "SEGOPS_SOCKET_MODE",
     .type = SEGOPS_SET_STRING,
     .def = "0660",
     .metavar = "OCTAL",
     .range_doc = "octal 0 to 0777",
     .help = "permission bits of unix-socket listeners",
     .parse = segops_cfg_parse_socket_mode,
     .format = segops_cfg_format_socket_mode},
    {.name = "token-file",
     .env = "SEGOPS_TOKEN_FILE",
     .type = SEGOPS_SET_STRING,
     .def = "",
     .metavar = "PATH",
     .range_doc = "a readable file",
     .help = "file holding the bearer token: 8 to 1024 bytes of printable ASCII without spaces, surrounding "
             "whitespace trimmed; with a token every path but /healthz and /readyz needs the header "
             "Authorization: Bearer followed by the token",
     .flags = SEGOPS_SET_HOST_ONLY,
     .parse = segops_cfg_parse_token_file,
     .format = segops_cfg_format_token_file},
    {.name = "token",
     .env = "SEGOPS_TOKEN",
     .type = SEGOPS_SET_STRING,
     .range_doc = "as --token-file's content",
     .help = "the bearer token itself (prefer a file; a token file wins)",
     .flags = SEGOPS_SET_ENV_ONLY | SEGOPS_SET_SECRET,
     .parse = segops_cfg_parse_token,
     .format = segops_cfg_format_token},
    {.name = "allow-unauthenticated",
     .env = "SEGOPS_ALLOW_UNAUTHENTICATED",
     .type = SEGOPS_SET_FLAG,
     INT_AT(allow_unauthenticated),
     .def = "0",
     .help = "allow a non-loopback --listen address without a token (refused otherwise: anyone who can reach "
             "it could use it)"},
};

static const segops_setting BACKEND_ROWS[] = {
    {.name = "backend",
     .env = "SEGOPS_BACKEND",
     .type = SEGOPS_SET_ENUM,
     AT(backend),
     .size = 8,
     .choices = "auto|cpu|cuda",
     .def = "auto",
     .help = "compute backend: auto = CUDA when a GPU is usable, else the CPU; a bad CUDA setting is refused, not "
             "served from the CPU"},
    {.name = "devices",
     .env = "SEGOPS_DEVICES",
     .type = SEGOPS_SET_LIST,
     .def = "",
     .def_doc = "all GPUs",
     .metavar = "LIST",
     .range_doc = "GPU ordinals 0 to 1024, comma-separated, or all",
     .help = "GPU ordinals to use, e.g. 0,1 (empty or all = every GPU)",
     .parse = segops_cfg_parse_devices,
     .format = segops_cfg_format_devices},
};

static const segops_setting LIMIT_ROWS[] = {
    {.name = "max-body-bytes",
     .env = "SEGOPS_MAX_BODY_BYTES",
     .type = SEGOPS_SET_BYTES,
     AT(max_body_bytes),
     .lo = 1,
     .def = "256M",
     .help = "largest request body; a larger one is answered 413"},
    {.name = "max-elements",
     .env = "SEGOPS_MAX_ELEMENTS",
     .type = SEGOPS_SET_INT,
     AT(max_elements),
     .lo = 1,
     .hi = INT32_MAX,
     .def = "64M",
     .help = "most elements per tensor (N*3 for a vec3 array)"},
    {.name = "max-body-items",
     .env = "SEGOPS_MAX_BODY_ITEMS",
     .type = SEGOPS_SET_INT,
     AT(max_body_items),
     .lo = 16,
     .def = "4M",
     .help = "most array and map items in one body (each JSON number is one); bounds the JSON decoder's memory"},
    {.name = "max-segments",
     .env = "SEGOPS_MAX_SEGMENTS",
     .type = SEGOPS_SET_INT,
     AT(max_segments),
     .lo = 0,
     .hi = INT32_MAX,
     .def = "auto",
     .def_doc = "auto (as --max-elements)",
     .flags = SEGOPS_SET_AUTO,
     .help = "largest num_segments"},
    {.name = "max-output-bytes",
     .env = "SEGOPS_MAX_OUTPUT_BYTES",
     .type = SEGOPS_SET_BYTES,
     AT(max_output_bytes),
     .lo = 1,
     .def = "256M",
     .help = "largest answer of one request (its outputs together, before encoding); beyond it 413"},
    {.name = "max-connections",
     .env = "SEGOPS_MAX_CONNECTIONS",
     .type = SEGOPS_SET_INT,
     AT(max_connections),
     .lo = 1,
     .hi = 1000000,
     .def = "1024",
     .help = "most concurrent connections; 16 more answer /healthz and /readyz only; lowered (with a warning) to "
             "what the open-files limit leaves"},
    {.name = "max-connections-per-peer",
     .env = "SEGOPS_MAX_CONNECTIONS_PER_PEER",
     .type = SEGOPS_SET_INT,
     AT(max_connections_per_peer),
     .lo = 1,
     .hi = 1000000,
     .def = "auto",
     .def_doc = "auto (half of --max-connections)",
     .flags = SEGOPS_SET_AUTO,
     .help = "most concurrent connections of one peer (its uid on a unix socket or loopback TCP, else its "
             "address); more are answered 503 and closed at once"},
    {.name = "max-inflight-bytes",
     .env = "SEGOPS_MAX_INFLIGHT_BYTES",
     .type = SEGOPS_SET_BYTES,
     AT(max_inflight_bytes),
     .lo = 1,
     .def = "2G",
     .help = "request memory held at once over all connections (bodies, decoded inputs, outputs, encoded "
             "answers); beyond it 503 with Retry-After; raised to --max-body-bytes + 1 when smaller"},
    {.name = "max-inflight-bytes-per-peer",
     .env = "SEGOPS_MAX_INFLIGHT_BYTES_PER_PEER",
     .type = SEGOPS_SET_BYTES,
     AT(max_inflight_bytes_per_peer),
     .lo = 1,
     .def = "auto",
     .def_doc = "auto (half of --max-inflight-bytes, at least twice --max-body-bytes)",
     .flags = SEGOPS_SET_AUTO,
     .help = "the share of --max-inflight-bytes one peer may hold at once, so that one client's unread answers "
             "cannot starve the others; beyond it that peer gets 503 with Retry-After"},
    {.name = "max-shm-bytes",
     .env = "SEGOPS_MAX_SHM_BYTES",
     .type = SEGOPS_SET_BYTES,
     AT(max_shm_bytes),
     .lo = 0,
     .def = "1G",
     .help = "shared-memory regions registered at once (all clients together); beyond it registration "
             "fails"},
    {.name = "max-shm-bytes-per-uid",
     .env = "SEGOPS_MAX_SHM_BYTES_PER_UID",
     .type = SEGOPS_SET_BYTES,
     AT(max_shm_bytes_per_uid),
     .lo = 0,
     .def = "auto",
     .def_doc = "auto (half of --max-shm-bytes)",
     .flags = SEGOPS_SET_AUTO,
     .help = "of --max-shm-bytes, what the regions of one client uid may hold, so that one uid's registrations "
             "cannot shut the others out"},
    {.name = "max-shm-regions",
     .env = "SEGOPS_MAX_SHM_REGIONS",
     .type = SEGOPS_SET_INT,
     AT(max_shm_regions),
     .lo = 0,
     .hi = SEGOPS_GUARD_TABLE_SLOTS,
     .def = "1024",
     .help = "shared-memory regions registered at once (all clients together)"},
    {.name = "max-shm-regions-per-uid",
     .env = "SEGOPS_MAX_SHM_REGIONS_PER_UID",
     .type = SEGOPS_SET_INT,
     AT(max_shm_regions_per_uid),
     .lo = 0,
     .hi = SEGOPS_GUARD_TABLE_SLOTS,
     .def = "auto",
     .def_doc = "auto (half of --max-shm-regions)",
     .flags = SEGOPS_SET_AUTO,
     .help = "of --max-shm-regions, how many one client uid may hold"},
    {.name = "max-mappings-per-uid",
     .env = "SEGOPS_MAX_MAPPINGS_PER_UID",
     .type = SEGOPS_SET_INT,
     AT(max_mappings_per_uid),
     .lo = 1,
     .hi = SEGOPS_GUARD_TABLE_SLOTS,
     .def = "auto",
     .def_doc = "auto (half of the guard table: 4096)",
     .flags = SEGOPS_SET_AUTO,
     .help = "client mappings one uid may hold at once (native rings and pools, shm regions) in the daemon's "
             "guard table of 8192"},
    {.name = "max-mapped-bytes",
     .env = "SEGOPS_MAX_MAPPED_BYTES",
     .type = SEGOPS_SET_BYTES,
     AT(max_mapped_bytes),
     .lo = 1,
     .def = "64G",
     .help = "client memory mapped at once over every client (native channels' rings and pools with the "
             "daemon's bookkeeping for their slots, shm regions); beyond it a hand-over or registration fails"},
    {.name = "max-mapped-bytes-per-uid",
     .env = "SEGOPS_MAX_MAPPED_BYTES_PER_UID",
     .type = SEGOPS_SET_BYTES,
     AT(max_mapped_bytes_per_uid),
     .lo = 1,
     .def = "auto",
     .def_doc = "auto (half of --max-mapped-bytes)",
     .flags = SEGOPS_SET_AUTO,
     .help = "of --max-mapped-bytes, what one client uid's channels and regions together may hold"},
    {.name = "max-pinned-bytes",
     .env = "SEGOPS_MAX_PINNED_BYTES",
     .type = SEGOPS_SET_BYTES,
     AT(max_pinned_bytes),
     .lo = 0,
     .def = "16G",
     .help = "of the mapped client memory, how much is pinned for direct device copies (CUDA) over every client; "
             "beyond it memory is used unpinned"},
    {.name = "max-pinned-bytes-per-uid",
     .env = "SEGOPS_MAX_PINNED_BYTES_PER_UID",
     .type = SEGOPS_SET_BYTES,
     AT(max_pinned_bytes_per_uid),
     .lo = 0,
     .def = "auto",
     .def_doc = "auto (half of --max-pinned-bytes)",
     .flags = SEGOPS_SET_AUTO,
     .help = "of --max-pinned-bytes, what one client uid's channels and regions together may have pinned"},
    {.name = "min-upload-rate",
     .env = "SEGOPS_MIN_UPLOAD_RATE",
     .type = SEGOPS_SET_BYTES,
     AT(min_upload_rate),
     .lo = 0,
     .def = "16k",
     .help = "bytes per second a request body must keep up after --idle-timeout, else it is "
             "cut (0 = any rate)"},
    {.name = "min-download-rate",
     .env = "SEGOPS_MIN_DOWNLOAD_RATE",
     .type = SEGOPS_SET_BYTES,
     AT(min_download_rate),
     .lo = 0,
     .def = "1M",
     .help = "bytes per second an answer must be taken at: one not taken whole within --answer-stall-timeout "
             "plus its size at this rate is cut and its memory freed (0 = any rate)"},
    {.name = "answer-stall-timeout",
     .env = "SEGOPS_ANSWER_STALL_TIMEOUT",
     .type = SEGOPS_SET_SECONDS,
     AT(answer_stall_timeout_s),
     .lo = 0,
     .hi = 86400,
     .def = "10",
     .help = "an answer the client takes nothing of for this long is cut and its memory freed (0 = never)"},
    {.name = "idle-timeout",
     .env = "SEGOPS_IDLE_TIMEOUT",
     .type = SEGOPS_SET_INT,
     AT(idle_timeout_s),
     .lo = 0,
     .hi = 86400,
     .def = "30",
     .metavar = "SECONDS",
     .range_doc = "0 to 86400 whole seconds",
     .help = "close connections idle (or trickling) this long"},
    {.name = "head-timeout",
     .env = "SEGOPS_HEAD_TIMEOUT",
     .type = SEGOPS_SET_SECONDS,
     AT(head_timeout_s),
     .lo = 1,
     .hi = 86400,
     .def = "5",
     .help = "a new connection must send a complete request head within this long (at most --idle-timeout)"},
    {.name = "request-timeout",
     .env = "SEGOPS_REQUEST_TIMEOUT",
     .type = SEGOPS_SET_SECONDS,
     AT(request_timeout_s),
     .lo = 1,
     .hi = 86400,
     .def = "60",
     .help = "a request still queued after this long fails with 504; an upload still running after this long is cut"},
};

static const segops_setting SCHED_ROWS[] = {
    {.name = "http-threads",
     .env = "SEGOPS_HTTP_THREADS",
     .type = SEGOPS_SET_INT,
     INT_AT(http_threads),
     .lo = 0,
     .hi = 1024,
     .def = "0",
     .def_doc = "0 (as --threads)",
     .help = "HTTP thread pool size (decode, encode, I/O); 0 = as --threads, or the online CPUs (2 to 64)"},
    {.name = "max-queue",
     .env = "SEGOPS_MAX_QUEUE",
     .type = SEGOPS_SET_INT,
     AT(max_queue),
     .lo = 1,
     .hi = 1000000,
     .def = "1024",
     .help = "requests waiting for a worker before 503 with Retry-After"},
    {.name = "max-queue-per-uid",
     .env = "SEGOPS_MAX_QUEUE_PER_UID",
     .type = SEGOPS_SET_INT,
     AT(max_queue_per_uid),
     .lo = 0,
     .hi = 1000000,
     .def = "0",
     .def_doc = "0 (half of --max-queue)",
     .help = "requests of one client uid (native channel, unix socket, loopback TCP) waiting for a worker "
             "before 503; a uid with none waiting is taken even when the queue is full, and waiting requests "
             "are served round-robin across uids"},
    {.name = "max-running-per-uid",
     .env = "SEGOPS_MAX_RUNNING_PER_UID",
     .type = SEGOPS_SET_INT,
     AT(max_running_per_uid),
     .lo = 1,
     .hi = 1000000,
     .def = "auto",
     .def_doc = "auto (half of the workers, at least 1)",
     .flags = SEGOPS_SET_AUTO,
     .help = "calls of one client uid running at once while another uid's calls wait; a worker that frees up "
             "takes the waiting uid's call (a uid alone uses every worker)"},
    {.name = "max-batch-elements",
     .env = "SEGOPS_MAX_BATCH_ELEMENTS",
     .type = SEGOPS_SET_INT,
     AT(max_batch_elements),
     .lo = 0,
     .def = "auto",
     .metavar = "N|auto",
     .flags = SEGOPS_SET_AUTO,
     .help = "join compatible waiting requests of at most 16k rows each into one backend call of up to N rows (0 = "
             "off; auto = 256k on the CUDA backend, 0 on the CPU backend, where HTTP is the limit and batching does "
             "not pay)"},
    {.name = "max-queue-delay-us",
     .env = "SEGOPS_MAX_QUEUE_DELAY_US",
     .type = SEGOPS_SET_INT,
     AT(max_queue_delay_us),
     .lo = 0,
     .hi = 10000000,
     .def = "0",
     .metavar = "US",
     .help = "microseconds a worker may wait to fill a batch (0 = batch only what already waits)"},
    {.name = "worker-spin-us",
     .env = "SEGOPS_WORKER_SPIN_US",
     .type = SEGOPS_SET_INT,
     AT(worker_spin_us),
     .lo = 0,
     .hi = 100000,
     .def = "50",
     .metavar = "US",
     .help = "microseconds an idle worker polls for new work before it sleeps (0 = sleep at once)"},
};

static const segops_setting LIFE_ROWS[] = {
    {.name = "drain-seconds",
     .env = "SEGOPS_DRAIN_SECONDS",
     .type = SEGOPS_SET_SECONDS,
     AT(drain_seconds),
     .lo = 0,
     .hi = 86400,
     .def = "0",
     .help = "on SIGTERM or SIGINT /readyz turns 503 at once and work is still served this long, so load "
             "balancers can remove the endpoint"},
    {.name = "shutdown-timeout",
     .env = "SEGOPS_SHUTDOWN_TIMEOUT",
     .type = SEGOPS_SET_SECONDS,
     AT(shutdown_timeout_s),
     .lo = 1,
     .hi = 86400,
     .def = "30",
     .help = "after the drain, new work gets 503 and in-flight work must finish within this long (else exit 1)"},
    {.name = "log-level",
     .env = "SEGOPS_LOG_LEVEL",
     .type = SEGOPS_SET_ENUM,
     AT(log_level),
     .choices = "error|warn|info|debug",
     .def = "info",
     .metavar = "LEVEL",
     .help = "what is logged to stderr",
     .parse = segops_cfg_parse_log_level},
};

static const segops_setting NATIVE_ROWS[] = {
    {.name = "native-socket",
     .env = "SEGOPS_NATIVE_SOCKET",
     .type = SEGOPS_SET_STRING,
     .def = "",
     .def_doc = "native.sock in a new directory /tmp/segopsd-PORT-XXXXXX (PORT: the first TCP listener's)",
     .metavar = "PATH|off",
     .range_doc = "an absolute path of at most 107 bytes, or off",
     .help = "unix socket of the native same-node channel, where clients on this host hand over their memory as "
             "memfds (mode as --socket-mode); off: no channel",
     .flags = SEGOPS_SET_HOST_ONLY,
     .parse = segops_cfg_parse_native_socket,
     .format = segops_cfg_format_native_socket},
    {.name = "native-spin-us",
     .env = "SEGOPS_NATIVE_SPIN_US",
     .type = SEGOPS_SET_INT,
     AT(native_spin_us),
     .lo = 0,
     .hi = 100000,
     .def = "50",
     .metavar = "US",
     .help = "microseconds a channel's thread polls its ring after a call before it sleeps (0 = sleep at once; "
             "spinning costs a core while a client is busy and answers it in about a microsecond)"},
    {.name = "native-max-channels-per-uid",
     .env = "SEGOPS_NATIVE_MAX_CHANNELS_PER_UID",
     .type = SEGOPS_SET_INT,
     AT(native_max_channels_per_uid),
     .lo = 1,
     .hi = 1000000,
     .def = "256",
     .help = "native channels one user id may hold open at once (all users together: --max-connections)"},
    {.name = "native-max-map-bytes",
     .env = "SEGOPS_NATIVE_MAX_MAP_BYTES",
     .type = SEGOPS_SET_BYTES,
     AT(native_max_map_bytes),
     .lo = 1,
     .def = "16G",
     .help = "client memory one native channel may hand over (its ring and pools), mapped by the daemon"},
    {.name = "native-max-pinned-bytes",
     .env = "SEGOPS_NATIVE_MAX_PINNED_BYTES",
     .type = SEGOPS_SET_BYTES,
     AT(native_max_pinned_bytes),
     .lo = 0,
     .def = "2G",
     .help = "of a native channel's memory, how much is pinned for direct device copies (CUDA); the rest is "
             "used unpinned"},
};

#define ROWS(r) r, sizeof r / sizeof r[0]
static segops_settings_group listen_group = {"Listening and access", NULL, ROWS(LISTEN_ROWS), NULL};
static segops_settings_group backend_group = {"Backend", NULL, ROWS(BACKEND_ROWS), NULL};
static segops_settings_group limit_group = {
    "Limits", "Every limit is reported by /v1/info; an error that hits one names the option to raise.",
    ROWS(LIMIT_ROWS), NULL};
static segops_settings_group sched_group = {"Threads and scheduling", NULL, ROWS(SCHED_ROWS), NULL};
static segops_settings_group native_group = {
    "Native same-node channel",
    "Clients on this host connect to this unix socket and hand over their memory as file descriptors "
    "(proto/native.md); /v1/info tells same-host peers its path.",
    ROWS(NATIVE_ROWS), NULL};
static segops_settings_group life_group = {
    "Shutdown and logging",
    "SIGTERM, SIGINT or any other signal that would end the process (SIGHUP is ignored): /readyz turns 503, work "
    "is served for --drain-seconds, then new work gets 503 and in-flight work finishes within --shutdown-timeout; "
    "exit 0 (1 when work was still running at the timeout).",
    ROWS(LIFE_ROWS), NULL};

/* Every group segopsd parses, in --help's order: its own, the backends' and the core's. */
static segops_settings_group *const GROUPS[] = {&listen_group,
                                                &backend_group,
                                                &limit_group,
                                                &sched_group,
                                                &native_group,
                                                &life_group,
                                                &segops_cpu_settings,
                                                &segops_cuda_settings,
                                                &segops_hostbuf_settings,
                                                &segops_idx_cache_settings,
                                                NULL};

segops_settings_group *const *segops_config_groups(void) { return GROUPS; }

static const char HELP_HEAD[] =
    "usage: segopsd [options]\n\n"
    "segopsd serves the segops segment operations over HTTP (API v1, the Open Inference Protocol, shared\n"
    "memory). Every option can also be set by the environment variable shown; flags win.\n"
    "docs/configuration.md is this list with the allowed values.\n\n";

static const char MARKDOWN_HEAD[] =
    "# Configuration reference\n\n"
    "<!-- Generated by `segopsd --help-markdown > docs/configuration.md`; CTest `config_reference` fails when\n"
    "it is stale. Edit the table in the code (server/config.c, core/, backends/), not this file. -->\n\n"
    "Every setting of `segopsd` is a command-line option and an environment variable (the option wins).\n"
    "Sizes take k, M, G or T suffixes (powers of 1024: `256M`); `GET /v1/info` reports every value under\n"
    "`settings`. A value out of range refuses to start, naming the option and what is allowed.\n";

static void print_help(void) {
  fputs(HELP_HEAD, stdout);
  segops_settings_print_help(GROUPS, stdout);
  printf("  %-36s %s\n", "--help", "print this help and exit");
  printf("  %-36s %s\n", "--help-markdown", "print the configuration reference (docs/configuration.md) and exit");
  printf("  %-36s %s\n\n", "--version", "print the version and exit");
  printf(
      "A non-loopback --listen address needs a token or --allow-unauthenticated.\n"
      "A token is %d to %d bytes of printable ASCII without spaces; surrounding whitespace\n"
      "and newlines are trimmed; anything else refuses to start.\n",
      SEGOPS_TOKEN_MIN, SEGOPS_TOKEN_MAX);
}

/* The actions of --help, --help-markdown and --version; 1 when name is one of them. */
static int run_action(const char *name) {
  if (!strcmp(name, "--help"))
    print_help();
  else if (!strcmp(name, "--help-markdown"))
    segops_settings_print_markdown(GROUPS, MARKDOWN_HEAD, stdout);
  else if (!strcmp(name, "--version"))
    printf("segopsd %s\n", SEGOPS_VERSION);
  else
    return 0;
  return 1;
}

/* Flags: --name VALUE or --name=VALUE; a flag type without a value sets it. */
static int apply_argv(int argc, char **argv, char *err, size_t errlen) {
  const segops_setting *seen[64]; /* options given so far: a repeated one appends (LIST) */
  size_t n_seen = 0;
  for (int a = 1; a < argc; a++) {
    const char *s = argv[a];
    if (run_action(s)) return SEGOPS_CONFIG_EXIT_OK;
    if (strncmp(s, "--", 2) != 0) {
      snprintf(err, errlen, "unexpected argument '%s' (see --help)", s);
      return SEGOPS_CONFIG_ERROR;
    }
    s += 2;
    const char *eq = strchr(s, '=');
    segops_settings_group *g = NULL;
    const segops_setting *o = segops_settings_find(GROUPS, s, eq ? (size_t)(eq - s) : strlen(s), &g);
    if (!o || (o->flags & SEGOPS_SET_ENV_ONLY)) {
      snprintf(err, errlen, "unknown option '%s' (see --help)", argv[a]);
      return SEGOPS_CONFIG_ERROR;
    }
    const char *v = eq ? eq + 1 : o->type == SEGOPS_SET_FLAG ? "1" : NULL;
    if (!v) {
      if (a + 1 >= argc) {
        snprintf(err, errlen, "option --%s needs a value", o->name);
        return SEGOPS_CONFIG_ERROR;
      }
      v = argv[++a];
    }
    int append = 0;
    for (size_t k = 0; k < n_seen && !append; k++) append = seen[k] == o;
    if (!append && n_seen < sizeof seen / sizeof seen[0]) seen[n_seen++] = o;
    if (segops_settings_apply(g, o, v, append, err, errlen)) return SEGOPS_CONFIG_ERROR;
  }
  return SEGOPS_CONFIG_OK;
}

/* One uid's share of whole: as configured (at most the whole), or by default (share < 0) half of
 * it, and never nothing of a whole that is something. */
static int64_t share_of(int64_t whole, int64_t share) {
  if (share < 0) share = whole / 2 > 0 ? whole / 2 : whole;
  return share < whole ? share : whole;
}

/* Per-peer shares: by default half the whole (the request memory at least room for a largest body
 * and as much work), never more than the whole nor less than one largest body; the head deadline
 * within the idle one. */
static void settle_peer_shares(segops_config *c) {
  if (c->max_inflight_bytes_per_peer < 0) {
    int64_t room = 2 * (c->max_body_bytes + 1);
    c->max_inflight_bytes_per_peer = c->max_inflight_bytes / 2;
    if (c->max_inflight_bytes_per_peer < room)
      c->max_inflight_bytes_per_peer = room < c->max_inflight_bytes ? room : c->max_inflight_bytes;
  }
  if (c->max_inflight_bytes_per_peer > c->max_inflight_bytes) c->max_inflight_bytes_per_peer = c->max_inflight_bytes;
  if (c->max_inflight_bytes_per_peer < c->max_body_bytes + 1) c->max_inflight_bytes_per_peer = c->max_body_bytes + 1;
  c->max_shm_bytes_per_uid = share_of(c->max_shm_bytes, c->max_shm_bytes_per_uid);
  c->max_shm_regions_per_uid = share_of(c->max_shm_regions, c->max_shm_regions_per_uid);
  c->max_mappings_per_uid = share_of(SEGOPS_GUARD_TABLE_SLOTS, c->max_mappings_per_uid);
  c->max_mapped_bytes_per_uid = share_of(c->max_mapped_bytes, c->max_mapped_bytes_per_uid);
  c->max_pinned_bytes_per_uid = share_of(c->max_pinned_bytes, c->max_pinned_bytes_per_uid);
  if (c->max_connections_per_peer < 0)
    c->max_connections_per_peer = c->max_connections > 1 ? c->max_connections / 2 : 1;
  if (c->max_connections_per_peer > c->max_connections) c->max_connections_per_peer = c->max_connections;
  if (c->idle_timeout_s > 0 && c->head_timeout_s > (double)c->idle_timeout_s)
    c->head_timeout_s = (double)c->idle_timeout_s;
}

/* What follows from the values together: defaults that depend on others, and the rule that a
 * non-loopback address needs a token. */
static int settle(segops_config *c, char *err, size_t errlen) {
  c->threads = (int)segops_cpu_conf.threads;
  if (c->max_segments < 0) c->max_segments = c->max_elements;
  /* A body of the largest allowed size must fit in the in-flight budget (+1: the buffer holds
   * one spare byte). */
  if (c->max_inflight_bytes < c->max_body_bytes + 1) c->max_inflight_bytes = c->max_body_bytes + 1;
  settle_peer_shares(c);
  if (c->http_threads <= 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    c->http_threads = c->threads > 0 ? c->threads : (int)(cpus < 2 ? 2 : cpus > 64 ? 64 : cpus);
  }
  for (int k = 0; k < c->n_listen && !c->token && !c->allow_unauthenticated; k++)
    if (!c->listen[k].is_unix && !segops_cfg_listen_is_loopback(c->listen[k].host)) {
      snprintf(err, errlen,
               "refusing to listen on %s without a token: anyone who can reach it could use it. Give a token "
               "(--token-file PATH or SEGOPS_TOKEN), listen on a loopback address, or pass --allow-unauthenticated",
               c->listen[k].host);
      return SEGOPS_CONFIG_ERROR;
    }
  return SEGOPS_CONFIG_OK;
}

int segops_config_load(segops_config *c, int argc, char **argv, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  listen_group.base = backend_group.base = limit_group.base = sched_group.base = native_group.base = life_group.base =
      c;
  segops_settings_group *const *groups = GROUPS;
  if (segops_settings_defaults(groups, err, errlen) || segops_settings_from_env(groups, err, errlen))
    return SEGOPS_CONFIG_ERROR;
  int rc = apply_argv(argc, argv, err, errlen);
  return rc != SEGOPS_CONFIG_OK ? rc : settle(c, err, errlen);
}

void segops_config_free(segops_config *c) {
  if (!c) return;
  free(c->token);
  c->token = NULL;
}
