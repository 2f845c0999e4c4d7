/* config.h: the daemon's configuration: its own rows of the configuration table (core/settings.h)
 * and the values they fill; docs/configuration.md and segopsd --help are generated from them. */
#ifndef SEGOPS_CONFIG_H
#define SEGOPS_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "settings.h"

#define SEGOPS_MAX_DEVICE_LIST 64
/* Bounds on a configured bearer token, in bytes (config_values.c: set_token). */
#define SEGOPS_TOKEN_MIN 8
#define SEGOPS_TOKEN_MAX 1024
#define SEGOPS_MAX_LISTEN 8
/* The daemon's table of guarded client mappings (server/shm/shm_guard.h): its size, which bounds
 * --max-shm-regions and --max-mappings-per-uid. */
#define SEGOPS_GUARD_TABLE_SLOTS 8192

/* One --listen address: TCP HOST:PORT or a unix-domain socket path ("unix:/path"). */
typedef struct {
  int is_unix;
  char host[256]; /* TCP: as given, without brackets for IPv6 */
  int port;       /* TCP: 0 = pick a free port */
  char path[108]; /* unix: the socket file (sun_path's size) */
} segops_listen_addr;

typedef struct {
  segops_listen_addr listen[SEGOPS_MAX_LISTEN]; /* every address served, in the order given */
  int n_listen;
  char listen_host[256]; /* the first TCP listener's host ("" when only unix sockets) */
  int listen_port;       /* and its port */
  unsigned socket_mode;  /* permission bits of unix sockets */
  int64_t max_shm_bytes; /* shared-memory regions registered at once, in bytes */
  /* Per-uid shares (-1: auto, half the whole, settled at load; the running share once the workers are known). */
  int64_t max_shm_bytes_per_uid;    /* of max_shm_bytes, one uid's regions */
  int64_t max_shm_regions;          /* regions registered at once */
  int64_t max_shm_regions_per_uid;  /* of them, one uid's */
  int64_t max_mappings_per_uid;     /* of the guard table's mappings (rings, pools, regions), one uid's */
  int64_t max_mapped_bytes;         /* client memory mapped at once (native rings, pools, bookkeeping; regions) */
  int64_t max_mapped_bytes_per_uid; /* of it, one uid's */
  int64_t max_pinned_bytes;         /* of it, pinned for device copies */
  int64_t max_pinned_bytes_per_uid; /* of that, one uid's */
  char backend[8];                  /* "auto", "cpu", "cuda" */
  int devices[SEGOPS_MAX_DEVICE_LIST];
  int n_devices;            /* 0 = all GPUs */
  int threads;              /* the CPU backend's --threads (segops_cpu_conf), copied for the HTTP pool's default */
  int http_threads;         /* libmicrohttpd thread pool size */
  char *token;              /* owned; NULL when auth is off */
  char token_file[512];     /* where the token came from ("" for the environment) */
  unsigned token_file_mode; /* its permission bits (0 when none): group or other bits are warned about */
  int64_t max_body_bytes;
  int64_t max_elements;   /* per tensor */
  int64_t max_body_items; /* array/map items per body: a JSON tree costs ~50 bytes an item */
  int64_t max_segments;   /* bound on num_segments */
  int64_t max_connections;
  int64_t max_connections_per_peer;    /* of one uid (unix sockets, loopback TCP) or address; -1: auto */
  int64_t max_output_bytes;            /* outputs of one request together */
  int64_t min_upload_rate;             /* bytes/s a body must keep up after idle_timeout; 0 = any */
  int64_t max_inflight_bytes;          /* request memory held at once (bodies, decoded inputs, outputs, answers) */
  int64_t max_inflight_bytes_per_peer; /* of that, by one peer; -1: auto */
  int64_t min_download_rate;           /* bytes/s an answer must be taken at after answer_stall_timeout_s; 0 = any */
  double answer_stall_timeout_s;       /* an answer nothing is taken of for this long is cut; 0 = never */
  double head_timeout_s;               /* a new connection's first request head must come within this */
  int64_t idle_timeout_s;
  double request_timeout_s;
  int64_t max_queue;           /* requests waiting for a worker */
  int64_t max_queue_per_uid;   /* of them, one client uid's; 0 = half of max_queue */
  int64_t max_running_per_uid; /* calls of one uid running while another uid's wait; -1: half the workers */
  int64_t max_batch_elements;  /* 0 = no batching; SEGOPS_BATCH_AUTO until the backend is known */
  int64_t max_queue_delay_us;  /* how long a worker waits to fill a batch */
  int64_t worker_spin_us;      /* idle workers poll this long before sleeping */
  int log_level;
  double drain_seconds;      /* after SIGTERM: readyz 503 but keep serving this long */
  double shutdown_timeout_s; /* then: finish in-flight work within this long, or exit 1 */
  int allow_unauthenticated; /* a non-loopback listen address without a token is refused unless set */

  /* The native channel (server/native/). */
  char native_socket[108];             /* its socket: "" derived from the port, "off" none */
  int64_t native_spin_us;              /* a channel's thread polls its ring this long after a call */
  int64_t native_max_channels_per_uid; /* native channels one user may hold open */
  int64_t native_max_map_bytes;        /* client memory one channel may hand over (ring and pools) */
  int64_t native_max_pinned_bytes;     /* of that, how much is pinned for device copies */
} segops_config;

#define SEGOPS_BATCH_AUTO (-1)
#define SEGOPS_BATCH_AUTO_GPU_ROWS (256 * 1024)

enum { SEGOPS_CONFIG_OK = 0, SEGOPS_CONFIG_EXIT_OK = 1, SEGOPS_CONFIG_ERROR = 2 };

/* Fills cfg, and the backends' and the core's settings, from defaults, then the environment, then
 * argv (flags win). Prints --help, --help-markdown or --version to stdout and returns
 * SEGOPS_CONFIG_EXIT_OK for them; on a bad value writes a message naming the option to err and
 * returns SEGOPS_CONFIG_ERROR. cfg owns its token: segops_config_free. */
int segops_config_load(segops_config *cfg, int argc, char **argv, char *err, size_t errlen);
void segops_config_free(segops_config *cfg);

/* The configuration table segopsd parses (a NULL-terminated list: the daemon's groups, whose
 * values live in the segops_config last loaded, then the backends' and the core's), for /v1/info. */
segops_settings_group *const *segops_config_groups(void);

#endif
