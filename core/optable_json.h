/* optable_json.h: the op table as JSON (optable_json.c), the one rendering of it that GET /v1/info,
 * the "local" transport and the generators (scripts/gen_optable.py) all use. */
#ifndef SEGOPS_OPTABLE_JSON_H
#define SEGOPS_OPTABLE_JSON_H

#include <stdbool.h>

struct json_t;

/* New reference (NULL when out of memory): {op: {pass: {"inputs": [{name, optional, use, shape},
 * ..., idx, num_segments], "outputs": [{name, shape}], "vec3_only"}}} in ops.def's order, shapes as
 * text ("(N,) or (N,3)"); use is "required", "cotangent" (optional: zeros when omitted) or "unread"
 * (optional: not read, validated when given). With internals, for the generators, each function
 * also carries id, c_name, elem_reads ("none", "counts", "norms"), n_acc [width 1, width 3] and
 * n_segval, and each of its own arguments and outputs "kind", the shape kind of ops.h (E, E3, G, G1,
 * M); idx and num_segments, the same in every function, carry none. */
struct json_t *segops_optable_json(bool internals);

#endif
