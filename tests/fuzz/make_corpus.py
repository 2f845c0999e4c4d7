#!/usr/bin/env python3
"""make_corpus.py: writes the fuzz seed corpus (tests/fuzz/corpus/{msgpack,json,prepare,oip,shm,native}/) from the
example bodies of proto/examples (proto/API.md's curl example and exact cases), plus seeds that reach every
path of the tensor record check (server/codec/codec_record.c) from every decoder: each source (inline bytes,
a list of numbers, a shared-memory reference) and each rule (dtype by name, by the call, by value, by code;
the rank; numbers that do not convert). The first byte of each seed picks (op, pass) as fuzz_common.h reads
it; for the prepare target bit 7 selects JSON.
Run: python3 tests/fuzz/make_corpus.py  (needs numpy and msgpack). The seeds are committed."""
import json
import os
import struct
import sys

import msgpack
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "proto", "examples"))
import make_examples  # noqa: E402

# The op table (proto/optable.json): ops and passes in the order of the C enums, which fuzz_pick reads
# the first byte by (op * passes + pass).
with open(os.path.join(HERE, "..", "..", "proto", "optable.json"), encoding="utf-8") as _f:
    _TABLE = json.load(_f)
OPS, PASSES = _TABLE["ops"], _TABLE["passes"]


def write(kind, name, data):
    d = os.path.join(HERE, "corpus", kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


OIP_TYPES = {"float32": ("FP32", np.float32), "float64": ("FP64", np.float64), "int32": ("INT32", np.int32),
             "int64": ("INT64", np.int64)}


def oip_seeds(jtext):
    """A v1 JSON body as an OIP infer request: (all-JSON header, header + binary data, header length)."""
    body = json.loads(jtext)
    top = body.get("dtype", "float64")
    ins_json, ins_bin, blobs = [], [], []
    for k, v in body.items():
        if k in ("dtype", "outputs"):
            continue
        if k == "num_segments":
            t = {"name": k, "datatype": "INT64", "shape": [1]}
            ins_json.append(dict(t, data=[v]))
            ins_bin.append(dict(t, parameters={"binary_data_size": 8}))
            blobs.append(struct.pack("<q", v))
            continue
        dt = v["dtype"] if isinstance(v, dict) else ("int32" if k == "idx" else top)
        a = np.array(v["data"] if isinstance(v, dict) else v, dtype=OIP_TYPES[dt][1])
        if isinstance(v, dict):
            a = a.reshape(v["shape"])
        t = {"name": k, "datatype": OIP_TYPES[dt][0], "shape": list(a.shape)}
        ins_json.append(dict(t, data=a.reshape(-1).tolist()))
        ins_bin.append(dict(t, parameters={"binary_data_size": a.nbytes}))
        blobs.append(a.tobytes())
    outs = [{"name": o, "parameters": {"binary_data": True}} for o in body.get("outputs", [])]
    j = {"id": "seed", "inputs": ins_json}
    b = {"inputs": ins_bin, "parameters": {"binary_data_output": True}}
    if outs:
        j["outputs"] = b["outputs"] = outs
    head = json.dumps(b).encode()
    return json.dumps(j).encode(), head + b"".join(blobs), len(head)


def shm_seeds():
    """fuzz_shm.c: byte 0 even = a registration body ("/segops-fuzz-self" is the target's own
    64 KiB object), odd = one use: region name, NUL, offset and size (little-endian u64)."""
    bodies = {
        "register_ok": {"key": "/segops-fuzz-self", "offset": 0, "byte_size": 4096},
        "register_offset": {"key": "/segops-fuzz-self", "offset": 65000, "byte_size": 536},
        "register_past": {"key": "/segops-fuzz-self", "offset": 65536, "byte_size": 1},
        "register_badkey": {"key": "../x", "byte_size": 1},
        "register_extra": {"key": "/a", "byte_size": 1, "x": 0},
        "register_neg": {"key": "/a", "offset": -1, "byte_size": 2**64 - 1},
    }
    for name, b in bodies.items():
        write("shm", name, b"\x00" + json.dumps(b).encode())
    for name, (region, off, size) in {"use_base": ("base", 0, 65536), "use_tail": ("base", 65535, 1),
                                      "use_wrap": ("base", 2**64 - 1, 2), "use_unknown": ("nope", 0, 1)}.items():
        write("shm", name, b"\x01" + region.encode() + b"\x00" + struct.pack("<QQ", off, size))
    # Byte 0 bit 1: the caller is another uid (it owns neither the object nor "base").
    write("shm", "register_foreign", b"\x02" + json.dumps(bodies["register_ok"]).encode())
    write("shm", "use_foreign", b"\x03base\x00" + struct.pack("<QQ", 0, 16))
    # Byte 0 bits 0 and 2: the object again as "alias" from offset A; base and alias ranges.
    for name, (a, o1, l1, o2, l2) in {"alias_overlap": (4096, 4096, 64, 0, 64), "alias_apart": (4096, 0, 4096, 0, 64),
                                      "alias_edge": (100, 164, 8, 63, 1)}.items():
        write("shm", name, b"\x05" + struct.pack("<QQQQQ", a, o1, l1, o2, l2))


def record_seeds():
    """Bodies whose tensors take each path of the record check, on msgpack, JSON and the OIP."""
    f64 = lambda *v: np.array(v, "<f8").tobytes()  # noqa: E731
    i32 = lambda *v: np.array(v, "<i4").tobytes()  # noqa: E731
    idx = {"dtype": "int32", "shape": [3], "data": i32(0, 1, 1)}
    mp = {
        "shm_ref": {"x": {"dtype": "float64", "shape": [3], "shm": {"region": "r", "offset": 64}}, "idx": idx,
                    "num_segments": 2, "outputs_shm": {"out": {"region": "r"}}},
        "shm_huge": {"x": {"dtype": "float64", "shape": [1 << 62, 4], "shm": {"region": "r"}}, "idx": idx,
                     "num_segments": 2},
        "shm_negative": {"x": {"dtype": "float64", "shape": [-3], "shm": {"region": "r"}}, "idx": idx,
                         "num_segments": 2},
        "seven_dims": {"x": {"dtype": "float64", "shape": [1, 1, 1, 1, 1, 1, 3], "data": f64(1, 2, 3)},
                       "idx": {"dtype": "int32", "shape": [1], "data": i32(0)}, "num_segments": 2},
        # feature channels: (N, *F) of rank 2 to 6
        "features_16": {"x": {"dtype": "float32", "shape": [3, 16], "data": np.arange(48, dtype="<f4").tobytes()},
                        "idx": idx, "num_segments": 2},
        "features_2_3": {"x": {"dtype": "float64", "shape": [3, 2, 3], "data": f64(*range(18))}, "idx": idx,
                         "num_segments": 2},
        "features_2_3_3": {"x": {"dtype": "float64", "shape": [3, 2, 3, 3], "data": f64(*range(54))}, "idx": idx,
                           "num_segments": 2},
        "features_rank6": {"x": {"dtype": "float64", "shape": [3, 1, 2, 1, 2, 1], "data": f64(*range(12))},
                           "idx": idx, "num_segments": 2},
        "unknown_dtype": {"x": {"dtype": "bfloat16", "shape": [3], "data": b"\0" * 6}, "idx": idx, "num_segments": 2},
        "unknown_name": {"q": {"dtype": "float16", "shape": [3], "data": b"\0" * 6}, "idx": idx, "num_segments": 2},
        "int64_idx": {"x": {"dtype": "float64", "shape": [3], "data": f64(1, 2, 3)},
                      "idx": {"dtype": "int64", "shape": [3], "data": np.array([0, 1, 1], "<i8").tobytes()},
                      "num_segments": 2, "dtype": "float32"},
    }
    js = {
        "bare_idx_int64": '{"x":[1,2,3],"idx":[0,1,4294967296],"num_segments":2}',
        "bare_float32": '{"dtype":"float32","x":[[1,2,3],[4,5,6]],"idx":[0,1],"num_segments":2}',
        "bare_seven_dims": '{"x":[[[[[[[1]]]]]]],"idx":[0],"num_segments":1}',
        "bare_features_2_3": '{"x":[[[1,2,3],[4,5,6]],[[7,8,9],[1,2,3]]],"idx":[0,1],"num_segments":2}',
        "bare_rank6": '{"dtype":"float32","x":[[[[[[1,2]]]]],[[[[[3,4]]]]]],"idx":[1,0],"num_segments":2}',
        "map_features_rank5": '{"x":{"dtype":"float64","shape":[2,1,2,1,2],"data":[1,2,3,4,5,6,7,8]},'
                              '"idx":[0,0],"num_segments":1}',
        "float32_range": '{"x":{"dtype":"float32","shape":[2],"data":[1,1e39]},"idx":[0,0],"num_segments":1}',
        "int32_range": '{"x":[1,2],"idx":{"dtype":"int32","shape":[2],"data":[0,2147483648]},"num_segments":1}',
        "idx_real": '{"x":[1,2],"idx":[0,0.5],"num_segments":1}',
        "not_a_number": '{"x":[1,"2",null],"idx":[0,0,0],"num_segments":1}',
        "shm_ref": '{"x":{"dtype":"float64","shape":[3],"shm":{"region":"r","offset":8}},"idx":[0,1,1],'
                   '"num_segments":2,"outputs_shm":{"out":{"region":"r","offset":64}},"outputs":["out"]}',
        "call_dtype_int": '{"dtype":"int32","x":[1],"idx":[0],"num_segments":1}',
        "unknown_name": '{"q":{"dtype":"float16","shape":[1],"data":[1]},"idx":[0],"num_segments":1}',
        "syntax_truncated": '{"x":[1,2',
        "syntax_repeated_key": '{"x":[1],"x":[2]}',
    }
    for name, body in mp.items():
        data = msgpack.packb(body, use_bin_type=True)
        write("msgpack", "record_" + name, bytes([0]) + data)
        write("prepare", "record_" + name + ".m", bytes([0]) + data)
    for name, text in js.items():
        write("json", "record_" + name, bytes([0]) + text.encode())
        write("prepare", "record_" + name + ".j", bytes([0x80]) + text.encode())
    ns = {"name": "num_segments", "datatype": "INT64", "shape": [1], "data": [2]}
    idx3 = {"name": "idx", "datatype": "INT32", "shape": [3], "data": [0, 1, 1]}
    x = {"name": "x", "datatype": "FP32", "shape": [3], "data": [1, 2, 3]}
    oip = {
        "ns_float": [x, idx3, {"name": "num_segments", "datatype": "FP64", "shape": [1], "data": [2.0]}],
        "ns_scalar_int32": [x, idx3, {"name": "num_segments", "datatype": "INT32", "shape": [], "data": [2]}],
        "unknown_datatype": [dict(x, datatype="BF16"), idx3, ns],
        "unknown_name": [dict(x, name="q", datatype="FP16"), idx3, ns],
        "seven_dims": [dict(x, shape=[1, 1, 1, 1, 1, 1, 3]), idx3, ns],
        "features_2_3": [dict(x, shape=[3, 2, 3], data=list(range(18))), idx3, ns],
        "features_nested_rank4": [dict(x, shape=[3, 1, 2, 1], data=[[[[1], [2]]], [[[3], [4]]], [[[5], [6]]]]), idx3, ns],
        "features_rank6": [dict(x, shape=[3, 1, 1, 1, 1, 2], data=list(range(6))), idx3, ns],
        "float32_range": [dict(x, data=[1, 1e39, 3]), idx3, ns],
        "idx_real": [x, dict(idx3, data=[0, 0.5, 1]), ns],
        "shm_size_mismatch": [{"name": "x", "datatype": "FP64", "shape": [3], "parameters": {
            "shared_memory_region": "r", "shared_memory_byte_size": 16}}, idx3, ns],
    }
    for name, inputs in oip.items():
        write("oip", "record_" + name + ".json", bytes([0, 0, 0]) + json.dumps({"inputs": inputs}).encode())
    # num_segments as INT32 binary data after the header.
    head = json.dumps({"inputs": [x, idx3, {"name": "num_segments", "datatype": "INT32", "shape": [1],
                                           "parameters": {"binary_data_size": 4}}]}).encode()
    write("oip", "record_ns_int32_binary.bin", bytes([0, len(head) & 0xFF, len(head) >> 8]) + head + struct.pack("<i", 2))


def ring_tensor(dtype=1, shape=(), pool=0, present=True, offset=0, nbytes=0, ndim=None):
    """A segops_ring_tensor: 96 bytes, up to 6 dimensions (SEGOPS_NATIVE_VERSION 2)."""
    sh = list(shape) + [0] * (6 - len(shape))
    ndim = len(shape) if ndim is None else ndim
    return struct.pack("<II6qIIQQQQ", dtype, ndim, *sh, pool, 1 if present else 0, offset, nbytes, 0, 0)


def native_seeds():
    """fuzz_native.c: 8 slots, slot 0, one pool of 4096 bytes, then a segops_ring_request (proto/segops_ring.h)."""
    absent = ring_tensor(present=False)

    def request(fn, ns, ins, idx, outs, flags=0, dtype=0):
        head = struct.pack("<IIqIIQ", fn, 0, ns, flags, dtype, 0) + b"\0" * 32
        ins = list(ins) + [absent] * (5 - len(ins))
        outs = list(outs) + [absent] * (3 - len(outs))
        return bytes([7, 0, 1]) + struct.pack("<H", 4096) + head + b"".join(ins) + idx + b"".join(outs)

    idx = ring_tensor(2, (4,), offset=64, nbytes=16)
    x = ring_tensor(1, (4,), offset=128, nbytes=32)
    out = ring_tensor(1, (), offset=1024, nbytes=64)
    seeds = {
        "record_bad_dtype": request(0, 2, [ring_tensor(9, (4,), offset=128, nbytes=32)], idx, [out]),
        "record_seven_dims": request(0, 2, [ring_tensor(1, (4, 1, 1, 1, 1, 1), offset=128, nbytes=32, ndim=7)], idx,
                                     [out]),
        "record_features_2_2": request(0, 2, [ring_tensor(1, (4, 2, 2), offset=128, nbytes=128)], idx, [out]),
        "record_features_rank6": request(0, 2, [ring_tensor(1, (4, 1, 2, 1, 1, 2), offset=128, nbytes=128)], idx,
                                         [out]),
        "record_int64_idx": request(0, 2, [x], ring_tensor(3, (4,), offset=64, nbytes=32), [out]),
        "record_call_dtype": request(2, 2, [], idx, [out], flags=1, dtype=0),  # sum double backward, zeros
        "record_call_dtype_int": request(2, 2, [], idx, [out], flags=1, dtype=2),
        "record_negative_dim": request(0, 2, [ring_tensor(1, (-4,), offset=128, nbytes=0)], idx, [out]),
    }
    for name, data in seeds.items():
        write("native", name, data)


def main():
    # Every function of the table: its example case, or the body make_examples writes for a row without one.
    cases = {c[:2]: c for c in make_examples.CASES}
    for row in _TABLE["functions"]:
        case = cases.get((row["op"], row["pass"])) or make_examples.default_case(row)
        fn = OPS.index(case[0]) * len(PASSES) + PASSES.index(case[1])
        jtext, mbytes = make_examples.bodies(case)
        stem = f"{case[0]}.{case[1]}"
        write("msgpack", stem, bytes([fn]) + mbytes)
        write("json", stem, bytes([fn]) + jtext.encode())
        write("prepare", stem + ".m", bytes([fn]) + mbytes)
        write("prepare", stem + ".j", bytes([fn | 0x80]) + jtext.encode())
        whole, binary, hl = oip_seeds(jtext)
        if hl < 65536:
            write("oip", stem + ".json", bytes([fn, 0, 0]) + whole)
            write("oip", stem + ".bin", bytes([fn, hl & 0xFF, hl >> 8]) + binary)
    write("json", "spec_example", bytes([0]) + make_examples.spec_example().encode())
    write("json", "map_form", bytes([0]) + make_examples.map_form_example().encode())
    write("prepare", "map_form.j", bytes([0x80]) + make_examples.map_form_example().encode())
    # A few shapes the examples do not have: deep nesting, trailing bytes, huge counts.
    write("json", "deep", bytes([0]) + b'{"x":[[[[[[[[[[1]]]]]]]]]]}')
    write("msgpack", "trailing", bytes([0]) + b"\x80\x00")
    write("msgpack", "huge_array", bytes([0]) + b"\x81\xa1x\xdd\xff\xff\xff\xff\x00")
    # OIP: ragged or rank-mismatched JSON data, and shared-memory references (outputs with a declared
    # byte size); bodies that open with a header-length text ("+12", digits).
    ns = {"name": "num_segments", "datatype": "INT64", "shape": [1], "data": [2]}
    idx = {"name": "idx", "datatype": "INT32", "shape": [3], "data": [0, 1, 1]}
    for name, data, shape in [("ragged", [[1, 2], [3]], [3]), ("rank", [[1, 2, 3]], [3]), ("nested", [[1], [2], [3]], [3, 1])]:
        x = {"name": "x", "datatype": "FP64", "shape": shape, "data": data}
        write("oip", name + ".json", bytes([0, 0, 0]) + json.dumps({"inputs": [x, idx, ns]}).encode())
    shm_in = {"name": "x", "datatype": "FP64", "shape": [3],
              "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 24, "shared_memory_offset": 8}}
    out = [{"name": "out", "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 1 << 40}}]
    write("oip", "shm_refs.json", bytes([0, 0, 0]) + json.dumps({"inputs": [shm_in, idx, ns], "outputs": out}).encode())
    write("oip", "header_plus.json", bytes([0, 0, 0]) + b"+12\x00" + b'{"inputs":[]}')
    write("oip", "header_digits.json", bytes([0, 0, 0]) + b"00000000000000000042")
    shm_seeds()
    record_seeds()
    native_seeds()


if __name__ == "__main__":
    main()
