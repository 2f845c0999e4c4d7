/* segops_ring.h: the native same-node channel's wire contract (proto/native.md): the control
 * messages on the daemon's channel socket and the layout of the shared request/answer ring.
 * This header is the definition; the daemon (server/native/) and libsegops (clients/c/src/native_*.c)
 * both include it. Fixed-width integers only, little-endian (the channel never leaves the host),
 * every size and offset pinned by a static assertion. */
#ifndef SEGOPS_RING_H
#define SEGOPS_RING_H

#include <stddef.h>
#include <stdint.h>

/* The channel's version. Any change to a message or to the ring's layout changes it; peers of
 * different versions refuse each other with a message naming both versions (proto/native.md). */
#define SEGOPS_NATIVE_VERSION 2u

/* ---- the control messages ---------------------------------------------------------------------
 * The socket is AF_UNIX, SOCK_SEQPACKET: one message per packet, at most SEGOPS_MSG_MAX bytes, a
 * memfd travelling with RING and POOL as SCM_RIGHTS. The exchange is strictly request-reply and
 * started by the client: HELLO -> WELCOME | ERROR, RING -> OK | ERROR, POOL -> OK | ERROR. */

#define SEGOPS_MSG_MAGIC 0x4e474553u /* "SEGN" in memory order */
#define SEGOPS_MSG_MAX 4096u

enum {
  SEGOPS_MSG_HELLO = 1,   /* client -> daemon, first: version, token */
  SEGOPS_MSG_WELCOME = 2, /* daemon -> client: the channel is open; its limits */
  SEGOPS_MSG_RING = 3,    /* client -> daemon, with the ring's memfd */
  SEGOPS_MSG_POOL = 4,    /* client -> daemon, with a pool's memfd */
  SEGOPS_MSG_OK = 5,      /* daemon -> client: the RING or POOL before it is mapped */
  SEGOPS_MSG_ERROR = 6,   /* daemon -> client: the message before it is refused, and the channel closes */
};

/* Starts every message. magic and version stay where they are in every version, so that a peer
 * of another version is recognised and told so. */
typedef struct {
  uint32_t magic;   /* SEGOPS_MSG_MAGIC */
  uint32_t version; /* the sender's SEGOPS_NATIVE_VERSION */
  uint32_t type;    /* SEGOPS_MSG_* */
  uint32_t size;    /* bytes of the whole message, this head included */
} segops_msg_head;

#define SEGOPS_TOKEN_BYTES 1024u /* the longest token a daemon accepts (SEGOPS_TOKEN_MAX) */

typedef struct {
  segops_msg_head h;
  uint32_t token_len; /* 0: no token */
  uint32_t flags;     /* 0 */
  char token[SEGOPS_TOKEN_BYTES];
} segops_msg_hello;

typedef struct {
  segops_msg_head h;
  uint32_t max_slots;     /* the most slots a ring may have here */
  uint32_t max_pools;     /* the most pools one channel may hand over */
  uint64_t max_map_bytes; /* ring and pools together, per channel */
  uint32_t daemon_pid;    /* for the client's log lines */
  uint32_t reserved;
} segops_msg_welcome;

typedef struct {
  segops_msg_head h;
  uint32_t slot_count; /* 1..max_slots; the memfd holds SEGOPS_RING_BYTES(slot_count) bytes or more */
  uint32_t reserved;
} segops_msg_ring;

typedef struct {
  segops_msg_head h;
  uint32_t pool_id; /* 0, 1, 2, ... in hand-over order: ids name pools in descriptors */
  uint32_t reserved;
  uint64_t size; /* the pool's size as the client mapped it; must equal the memfd's */
} segops_msg_pool;

typedef struct {
  segops_msg_head h;
  uint32_t id; /* the pool id accepted, or 0 for the ring */
  uint32_t reserved;
} segops_msg_ok;

typedef struct {
  segops_msg_head h;
  int32_t code; /* SEGOPS_E_* of segops_types.h */
  uint32_t reserved;
  char name[40];     /* its wire code, NUL-terminated */
  char message[512]; /* why, NUL-terminated */
} segops_msg_error;

/* ---- the ring -----------------------------------------------------------------------------------
 * One memfd: a header, then slot_count fixed-size slots. A slot carries one call at a time:
 * the client writes the request and sets state SUBMITTED; the daemon copies the request into its
 * own memory before it checks a byte of it, runs the call, writes the answer and sets state
 * DONE; the client reads the answer and sets state FREE (proto/native.md has the life cycle). */

#define SEGOPS_RING_MAGIC 0x474e4952504f4753ull /* "SGOPRING" in memory order */
#define SEGOPS_RING_MAX_SLOTS 256u
#define SEGOPS_RING_HEADER_BYTES 256u
#define SEGOPS_RING_SLOT_BYTES 2048u
#define SEGOPS_RING_BYTES(slots) ((uint64_t)SEGOPS_RING_HEADER_BYTES + (uint64_t)(slots)*SEGOPS_RING_SLOT_BYTES)

typedef struct {
  /* line 0: written once by the client before the hand-over */
  uint64_t magic;        /* SEGOPS_RING_MAGIC */
  uint32_t version;      /* SEGOPS_NATIVE_VERSION */
  uint32_t slot_count;   /* as in the RING message */
  uint32_t slot_bytes;   /* SEGOPS_RING_SLOT_BYTES */
  uint32_t header_bytes; /* SEGOPS_RING_HEADER_BYTES: the first slot's offset */
  uint8_t reserved0[40];
  /* line 1: the client's doorbell, the daemon's futex word */
  uint32_t doorbell;  /* the client adds 1 after every submission */
  int32_t caller_tid; /* the tid of the client thread that last rang, in the client's pid namespace; 0 = unknown */
  uint8_t reserved1[56];
  /* line 2: the daemon's side */
  uint32_t daemon_sleeps; /* 1 while the daemon sleeps on doorbell (or is about to): then wake it */
  uint8_t reserved2[60];
  uint8_t reserved3[64];
} segops_ring_header;

/* Slot states (the low bits of segops_ring_slot.state). */
#define SEGOPS_SLOT_FREE 0u
#define SEGOPS_SLOT_SUBMITTED 1u
#define SEGOPS_SLOT_DONE 2u
#define SEGOPS_SLOT_STATE_MASK 0x7fffffffu
/* Set by a client about to sleep on the slot's state word: the daemon then wakes it. */
#define SEGOPS_SLOT_WAITING 0x80000000u

/* segops_ring_tensor.flags */
#define SEGOPS_TENSOR_PRESENT 1u

/* A tensor: `nbytes` bytes at `offset` of pool `pool`, C-contiguous, of dtype and shape. For an
 * input, nbytes is the data's length (it must equal prod(shape) * itemsize, as over HTTP); for a
 * requested output, the bytes set aside for it (offset 64-byte aligned), and dtype and shape are
 * ignored: the daemon answers them. */
typedef struct {
  uint32_t dtype; /* segops_dtype: SEGOPS_F32, SEGOPS_F64, SEGOPS_I32, SEGOPS_I64 */
  uint32_t ndim;  /* 0..SEGOPS_MAX_NDIM (6) */
  int64_t shape[6];
  uint32_t pool;
  uint32_t flags; /* SEGOPS_TENSOR_PRESENT; 0: an omitted input, an output not asked for */
  uint64_t offset;
  uint64_t nbytes;
  uint64_t reserved[2];
} segops_ring_tensor;

/* segops_ring_request.flags */
/* dtype below is the call's float dtype when no float input fixes it (libsegops does not send it:
 * such a call answers float64 on every transport, proto/native.md) */
#define SEGOPS_REQ_DTYPE 1u

typedef struct {
  uint32_t fn;   /* SEGOPS_FN_* (op * 3 + pass, in the op table's order) */
  uint32_t want; /* bit k: output k of the function is computed; 0: every output */
  int64_t num_segments;
  uint32_t flags;      /* SEGOPS_REQ_* */
  uint32_t dtype;      /* with SEGOPS_REQ_DTYPE: SEGOPS_F32 or SEGOPS_F64 */
  uint64_t timeout_us; /* how long the client will wait for this call; 0: no bound of its own */
  uint8_t reserved[32];
  segops_ring_tensor in[5]; /* the function's inputs in the table's order (SEGOPS_MAX_INPUTS) */
  segops_ring_tensor idx;
  segops_ring_tensor out[3]; /* places of the requested outputs (SEGOPS_MAX_OUTPUTS) */
} segops_ring_request;

typedef struct {
  uint32_t dtype;
  uint32_t ndim; /* 0..SEGOPS_MAX_NDIM (6) */
  int64_t shape[6];
} segops_ring_shape;

typedef struct {
  int32_t status; /* SEGOPS_OK or SEGOPS_E_* */
  uint32_t reserved0;
  uint64_t seq;             /* the request's seq, echoed */
  segops_ring_shape out[3]; /* on success: each requested output's dtype and shape */
  char name[40];            /* on failure: the wire code ("invalid_argument"), NUL-terminated */
  char message[512];        /* on failure: the same message HTTP gives, NUL-terminated */
  uint8_t reserved1[32];
} segops_ring_answer;

typedef struct {
  uint32_t state; /* SEGOPS_SLOT_* | SEGOPS_SLOT_WAITING: the futex word the client sleeps on */
  uint32_t reserved0;
  uint64_t seq; /* the client's number for the call, echoed in the answer */
  uint8_t reserved1[48];
  segops_ring_request req; /* written by the client while the slot is FREE */
  segops_ring_answer ans;  /* written by the daemon before it sets DONE */
  uint8_t reserved2[SEGOPS_RING_SLOT_BYTES - 64 - 928 - 768];
} segops_ring_slot;

#if defined(__cplusplus)
#define SEGOPS_RING_ASSERT_ static_assert
#else
#define SEGOPS_RING_ASSERT_ _Static_assert
#endif
SEGOPS_RING_ASSERT_(sizeof(segops_msg_head) == 16, "message head");
SEGOPS_RING_ASSERT_(offsetof(segops_msg_head, version) == 4, "the version stays at byte 4 in every version");
SEGOPS_RING_ASSERT_(sizeof(segops_msg_hello) == 16 + 8 + SEGOPS_TOKEN_BYTES, "HELLO");
SEGOPS_RING_ASSERT_(sizeof(segops_msg_welcome) == 40, "WELCOME");
SEGOPS_RING_ASSERT_(sizeof(segops_msg_ring) == 24, "RING");
SEGOPS_RING_ASSERT_(sizeof(segops_msg_pool) == 32, "POOL");
SEGOPS_RING_ASSERT_(sizeof(segops_msg_ok) == 24, "OK");
SEGOPS_RING_ASSERT_(sizeof(segops_msg_error) == 16 + 8 + 40 + 512, "ERROR");
SEGOPS_RING_ASSERT_(sizeof(segops_msg_hello) <= SEGOPS_MSG_MAX, "messages fit one packet");
SEGOPS_RING_ASSERT_(sizeof(segops_ring_header) == SEGOPS_RING_HEADER_BYTES, "ring header");
SEGOPS_RING_ASSERT_(offsetof(segops_ring_header, version) == 8, "the version stays at byte 8 in every version");
SEGOPS_RING_ASSERT_(offsetof(segops_ring_header, doorbell) == 64, "doorbell on its own cache line");
SEGOPS_RING_ASSERT_(offsetof(segops_ring_header, caller_tid) == 68, "caller's tid beside the doorbell");
SEGOPS_RING_ASSERT_(offsetof(segops_ring_header, daemon_sleeps) == 128, "daemon's word on its own line");
SEGOPS_RING_ASSERT_(sizeof(segops_ring_tensor) == 96, "tensor descriptor");
SEGOPS_RING_ASSERT_(offsetof(segops_ring_tensor, offset) == 64, "tensor offset");
SEGOPS_RING_ASSERT_(sizeof(segops_ring_request) == 928, "request");
SEGOPS_RING_ASSERT_(offsetof(segops_ring_request, in) == 64, "request inputs");
SEGOPS_RING_ASSERT_(offsetof(segops_ring_request, idx) == 544, "request idx");
SEGOPS_RING_ASSERT_(offsetof(segops_ring_request, out) == 640, "request outputs");
SEGOPS_RING_ASSERT_(sizeof(segops_ring_shape) == 56, "answer shape");
SEGOPS_RING_ASSERT_(sizeof(segops_ring_answer) == 768, "answer");
SEGOPS_RING_ASSERT_(offsetof(segops_ring_answer, message) == 224, "answer message");
SEGOPS_RING_ASSERT_(offsetof(segops_ring_slot, req) == 64, "slot request");
SEGOPS_RING_ASSERT_(offsetof(segops_ring_slot, ans) == 992, "slot answer");
SEGOPS_RING_ASSERT_(sizeof(segops_ring_slot) == SEGOPS_RING_SLOT_BYTES, "slot");
#undef SEGOPS_RING_ASSERT_

#endif
