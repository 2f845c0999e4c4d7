/* oip.h: the Open Inference Protocol (KServe v2 REST) infer codec: a JSON request header,
 * optionally followed by binary tensor data, decoded into the same segops_request the v1 codecs
 * produce (validation is core/prepare.c's, shared), and the response encoder. */
#ifndef SEGOPS_CODEC_V2_H
#define SEGOPS_CODEC_V2_H

#include <stdbool.h>
#include <stddef.h>

#include "codec.h"
#include "codec_record.h"

/* What an OIP request asks beyond the function's arguments. */
typedef struct {
  size_t header_len;                   /* Inference-Header-Content-Length; 0: the whole body is JSON */
  bool binary_default;                 /* parameters.binary_data_output */
  bool out_binary[SEGOPS_MAX_OUTPUTS]; /* per output of the row: answer as binary data */
  bool out_set[SEGOPS_MAX_OUTPUTS];    /* the request's outputs list named it (its choice wins) */
  char id[128];                        /* the request's "id", echoed */
  bool has_id;
} segops_oip_opts;

/* The model name of a function, "<op>_<pass>", written into buf (64 bytes are enough); returns buf. */
#define SEGOPS_OIP_MODEL_NAME_MAX 64
const char *segops_oip_model_name(segops_op op, segops_pass pass, char *buf);
/* Parses a model name; 0 and (op, pass), or -1. */
int segops_oip_model_parse(const char *s, size_t len, segops_op *op, segops_pass *pass);
/* The OIP datatype of a dtype ("FP32", ...). */
const char *segops_oip_datatype(segops_dtype dt);
/* The OIP's words for the record check (codec_record.h), which parses its datatypes by them. */
extern const segops_wire_words segops_wire_oip;
#define SEGOPS_WIRE_OIP (&segops_wire_oip)

/* The value of an Inference-Header-Content-Length header: 1 to 20 decimal digits and nothing
 * else (no sign, space or suffix), a count from 1 to max. 0 with *out set, or -1. */
int segops_oip_header_length(const char *value, size_t max, size_t *out);

/* Decodes an infer body for function (op, pass): body[0, opts->header_len) is the JSON header
 * (the whole body when header_len is 0), the rest the binary tensor data it refers to. Tensor
 * data from the binary part borrows the body, which must outlive *out. opts->header_len is the
 * caller's; the decoder fills the rest of *opts. Errors and messages as segops_decode_json. */
int segops_decode_oip(const char *body, size_t len, segops_op op, segops_pass pass, const segops_codec_limits *lim,
                      segops_decoded *out, segops_oip_opts *opts, char *err, size_t errlen);

/* Encodes the response of (op, pass): the JSON header first, then the data of every binary
 * output in order (borrowed from the outputs: no payload copy). out_binary[i] says whether
 * outs[i] goes as binary data. enc->json_len is the header's size (== enc->total when nothing
 * is binary). Returns 0 or SEGOPS_E_NOMEM. */
int segops_encode_oip(segops_op op, segops_pass pass, const char *id, const segops_out_tensor *outs,
                      const bool *out_binary, int n, segops_encoded *enc);

#endif
