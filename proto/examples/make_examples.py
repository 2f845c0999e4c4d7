#!/usr/bin/env python3
"""make_examples.py: the example request bodies of proto/examples/: one JSON and one msgpack body per
function of the op table (proto/optable.json), usable with `curl --data-binary @file`. A function
with a case below (proto/API.md's curl example and exact cases) gets that case; any other (a new
op's) gets small values of its row's shapes (default_case).

Run from anywhere: python3 proto/examples/make_examples.py  (needs numpy and msgpack); or
python3 scripts/gen_optable.py --write, which writes these with the table's other restatements.
The generated files are committed; CTest optable_generated_files keeps them equal to this
script's output, and tests/codec decodes and validates every one of them."""
import json
import os
import sys

import msgpack
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

I0 = [0, 0, 1, 1]  # 4 elements in 2 segments
X3 = [[1, 0, 0], [0, 2, 0], [0, 0, 3], [4, 0, 0]]
Y3 = [[2, 3, 4], [5, 6, 7], [8, 9, 10], [11, 12, 13]]
RX = [[3, 4, 0], [0, 0, 0], [1, 2, 2], [0, 0, 0]]
V1 = [[1, 0, 0]]
M1 = [[[1, 2, 0], [0, 1, 0], [0, 0, 1]]]
MX, MI = [1, 3, 2, 3, -0.0, 0.0], [0, 0, 0, 0, 1, 1]  # max/min: ties; segment 2 empty

# (op, pass, arguments, num_segments, extra top-level keys). Values: nested lists of floats, idx ints.
CASES = [
    ("segmented_sum", "forward", {"x": [1, 2, 3, 4, 5, 6], "idx": [0, 0, 1, 1, 1, 2]}, 3, {}),
    ("segmented_sum", "backward", {"g_out": [3.5, -1.25], "idx": [0, 1, 1]}, 2, {}),
    ("segmented_sum", "double_backward", {"gg_x": [1, 2, 3, 4], "idx": I0}, 2, {}),
    ("segmented_dot", "forward", {"x": X3, "y": Y3, "idx": I0}, 2, {}),
    ("segmented_dot", "backward", {"g_out": [1, 1], "x": X3, "y": Y3, "idx": I0}, 2, {}),
    ("segmented_dot", "double_backward",
     {"gg_x": Y3, "gg_y": X3, "g_out": [1, 1], "x": X3, "y": Y3, "idx": I0}, 2, {}),
    ("segmented_mul", "forward", {"x": X3, "y": [2, -1], "idx": I0}, 2, {}),
    ("segmented_mul", "backward", {"g_out": Y3, "x": X3, "y": [2, -1], "idx": I0}, 2, {"outputs": ["grad_y"]}),
    ("segmented_mul", "double_backward",
     {"gg_x": Y3, "gg_y": [0.5, 0.25], "g_out": Y3, "x": X3, "y": [2, -1], "idx": I0}, 2, {}),
    ("segmented_mean", "forward", {"x": [[1, 1, 1]] * 3, "idx": [0, 0, 1]}, 3, {}),
    ("segmented_mean", "backward", {"g_out": [[1, 2, 3], [4, 5, 6], [7, 8, 9]], "idx": [0, 0, 1]}, 3, {}),
    ("segmented_mean", "double_backward", {"gg_x": [1, 2, 3], "idx": [0, 0, 1]}, 3, {}),
    ("segmented_rms_norm", "forward", {"x": RX, "idx": [0, 0, 1, 2]}, 4, {"dtype": "float32"}),
    ("segmented_rms_norm", "backward", {"g_out": [1, 1, 1, 1], "x": RX, "idx": [0, 0, 1, 2]}, 4, {}),
    ("segmented_rms_norm", "double_backward",
     {"gg_x": X3, "g_out": [1, 1, 1, 1], "x": RX, "idx": [0, 0, 1, 2]}, 4, {}),
    ("segmented_matvec", "forward", {"v": V1, "m": M1, "idx": [0]}, 1, {}),
    ("segmented_matvec", "backward", {"g_out": [[0.5, -1, 2]], "v": V1, "m": M1, "idx": [0]}, 1, {}),
    ("segmented_matvec", "double_backward",
     {"gg_v": [[1, 1, 1]], "gg_m": M1, "g_out": [[0.5, -1, 2]], "v": V1, "m": M1, "idx": [0]}, 1, {}),
    # max and min: a tie (3 and 3), a signed-zero tie, an empty segment (proto/API.md, Formulas).
    ("segmented_max", "forward", {"x": MX, "idx": MI}, 3, {}),
    ("segmented_max", "backward", {"g_out": [10, 20, 30], "x": MX, "idx": MI}, 3, {}),
    ("segmented_max", "double_backward", {"gg_x": [1, 2, 3, 4, 5, 6], "x": MX, "idx": MI}, 3, {}),
    ("segmented_min", "forward", {"x": MX, "idx": MI}, 3, {}),
    ("segmented_min", "backward", {"g_out": [10, 20, 30], "x": MX, "idx": MI}, 3, {}),
    ("segmented_min", "double_backward", {"gg_x": [1, 2, 3, 4, 5, 6], "x": MX, "idx": MI}, 3, {}),
]


def tensor_msgpack(name, value, dtype):
    if name == "idx":
        a = np.asarray(value, dtype="<i4")
    else:
        a = np.asarray(value, dtype="<f4" if dtype == "float32" else "<f8")
    return {"dtype": "int32" if name == "idx" else dtype, "shape": list(a.shape), "data": a.tobytes()}


def bodies(case):
    """Returns (json_text, msgpack_bytes) for one case."""
    op, pas, args, ns, extra = case
    dtype = extra.get("dtype", "float64")
    doc = {}
    for k, v in args.items():
        doc[k] = v if k == "idx" else np.asarray(v, dtype=float).tolist()
    doc["num_segments"] = ns
    doc.update(extra)
    jtext = json.dumps(doc, separators=(",", ":"))
    mdoc = {k: tensor_msgpack(k, v, dtype) for k, v in args.items()}
    mdoc["num_segments"] = ns
    mdoc.update({k: v for k, v in extra.items() if k != "dtype"})
    return jtext, msgpack.packb(mdoc, use_bin_type=True)


def map_form_example():
    """proto/API.md's curl example with map-form JSON tensors (the msgpack layout with data as a list)."""
    return json.dumps({"x": {"dtype": "float64", "shape": [6], "data": [1, 2, 3, 4, 5, 6]},
                       "idx": {"dtype": "int64", "shape": [6], "data": [0, 0, 1, 1, 1, 2]},
                       "num_segments": 3}, separators=(",", ":"))


def spec_example():
    """The body of proto/API.md's curl example, byte for byte."""
    return '{"x":[1,2,3,4,5,6],"idx":[0,0,1,1,1,2],"num_segments":3}'


def default_case(fn):
    """A case for a function without one in CASES, from its row (proto/optable.json): 4 elements in 2
    segments, rows of width 3 for a vec3-only op else 1, every input given, values small integers."""
    n, s, w = 4, 2, 3 if fn["vec3_only"] else 1
    lead = {"E": n, "E3": n, "G": s, "G1": s, "G1F": s, "M": s}
    trail = {"E": (w,) if w == 3 else (), "E3": (3,), "G": (w,) if w == 3 else (), "G1": (), "G1F": (), "M": (3, 3)}
    args = {}
    for k, inp in enumerate(fn["inputs"]):
        shape = (lead[inp["shape"]],) + trail[inp["shape"]]
        args[inp["name"]] = (np.arange(int(np.prod(shape))).reshape(shape) % 5 + k + 1).tolist()
    args["idx"] = [0, 0, 1, 1]
    return (fn["op"], fn["pass"], args, s, {})


def bodies_of(table):
    """{file name: bytes} of every example body of the table's functions."""
    cases = {c[:2]: c for c in CASES}
    files = {}
    for fn in table["functions"]:
        case = cases.get((fn["op"], fn["pass"])) or default_case(fn)
        jtext, mbytes = bodies(case)
        if case[:2] == ("segmented_sum", "forward"):
            jtext = spec_example()
        files[f"{fn['op']}.{fn['pass']}.json"] = jtext.encode()
        files[f"{fn['op']}.{fn['pass']}.msgpack"] = mbytes
    files["segmented_sum.forward.map.json"] = map_form_example().encode()
    return files


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else HERE
    with open(os.path.join(HERE, "..", "optable.json"), encoding="utf-8") as f:
        table = json.load(f)
    for name, data in bodies_of(table).items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
