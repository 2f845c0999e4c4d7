"""test_oip_shm.py: tensors by reference on the Open Inference Protocol (proto/API.md, Open Inference
Protocol, Shared memory) on the real segopsd, driven by the real tritonclient[http] and its own
system shared-memory utilities: inputs read from and outputs written to registered POSIX shm
regions give the bits of the same call with inline binary data; an output answered from shared
memory carries the region's parameters and no data; register/status/unregister; an out-of-bounds
offset, a wrong byte size and num_segments by reference are 400 with a clear message."""
import os

import numpy as np
import pytest
import tritonclient.http as th  # CTest runs this through run_pytest.py --require: SKIP (77) without it
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from reference import random_case

DT = {"float32": "FP32", "float64": "FP64"}
CASES = [("segmented_sum", "forward", 1), ("segmented_dot", "double_backward", 3),
         ("segmented_matvec", "backward", 3)]


class Region:
    """One tritonclient-created POSIX shm region, registered with the daemon."""

    def __init__(self, tc, label, size):
        self.tc, self.name, self.key = tc, f"{label}_{os.getpid()}", f"/segops_oipshm_{label}_{os.getpid()}"
        self.size = size
        self.handle = shm.create_shared_memory_region(self.name, self.key, size)
        tc.register_system_shared_memory(self.name, self.key, size)

    def close(self):
        self.tc.unregister_system_shared_memory(self.name)
        shm.destroy_shared_memory_region(self.handle)


def round_up(n, a):
    return (n + a - 1) // a * a


def inline_inputs(args, idx, S, dtype):
    ins = []
    for name, a in list(args.items()) + [("idx", np.asarray(idx, np.int32))]:
        t = th.InferInput(name, list(a.shape), DT[dtype] if name != "idx" else "INT32")
        t.set_data_from_numpy(a, binary_data=True)
        ins.append(t)
    t = th.InferInput("num_segments", [1], "INT64")
    t.set_data_from_numpy(np.array([S], np.int64), binary_data=True)
    return ins + [t]


@pytest.mark.parametrize("op,pas,width", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("align", [64, 8])  # 8: outputs off the 64-byte grid are copied, not written in place
def test_shm_matches_inline_binary(tc, table, op, pas, width, dtype, align):
    fn = table[op][pas]
    rng = np.random.default_rng(hash((op, pas, dtype, "oipshm")) & 0xFFFF)
    args, idx, S = random_case(rng, fn, width)
    args = {k: np.ascontiguousarray(v, dtype=dtype) for k, v in args.items()}
    model = f"{op}_{pas}"
    want = tc.infer(model, inline_inputs(args, idx, S, dtype),
                    outputs=[th.InferRequestedOutput(o["name"], binary_data=True) for o in fn["outputs"]])
    outs = {o["name"]: want.as_numpy(o["name"]) for o in fn["outputs"]}

    tensors = list(args.items()) + [("idx", np.asarray(idx, np.int32))]
    in_off, at = {}, align
    for name, a in tensors:  # each input at its own offset, `align` apart
        in_off[name] = at
        at = round_up(at + a.nbytes, 64) + align
    rin = Region(tc, f"in_{dtype}_{align}", at)
    out_off, at = {}, align
    for name, a in outs.items():
        out_off[name] = at
        at = round_up(at + a.nbytes, 64) + align
    rout = Region(tc, f"out_{dtype}_{align}", at)
    try:
        status = {r["name"]: r for r in tc.get_system_shared_memory_status()}
        assert status[rin.name]["key"] == rin.key and int(status[rin.name]["byte_size"]) == rin.size
        assert int(status[rout.name]["byte_size"]) == rout.size
        ins = []
        for name, a in tensors:
            shm.set_shared_memory_region(rin.handle, [a], offset=in_off[name])
            t = th.InferInput(name, list(a.shape), DT[dtype] if name != "idx" else "INT32")
            t.set_shared_memory(rin.name, a.nbytes, offset=in_off[name])
            ins.append(t)
        t = th.InferInput("num_segments", [1], "INT64")
        t.set_data_from_numpy(np.array([S], np.int64), binary_data=False)
        ins.append(t)
        req_outs = []
        for name, a in outs.items():
            o = th.InferRequestedOutput(name)
            o.set_shared_memory(rout.name, a.nbytes, offset=out_off[name])
            req_outs.append(o)
        res = tc.infer(model, ins, outputs=req_outs)
        r = res.get_response()
        assert [o["name"] for o in r["outputs"]] == list(outs)
        for o in r["outputs"]:
            want_o = outs[o["name"]]
            assert "data" not in o and o["datatype"] == DT[dtype] and o["shape"] == list(want_o.shape)
            assert o["parameters"] == {"shared_memory_region": rout.name, "shared_memory_offset": out_off[o["name"]],
                                       "shared_memory_byte_size": want_o.nbytes}, o
            got = shm.get_contents_as_numpy(rout.handle, want_o.dtype, want_o.shape, offset=out_off[o["name"]])
            assert got.tobytes() == want_o.tobytes(), o["name"]
    finally:
        rin.close()
        rout.close()
    names = {r["name"] for r in tc.get_system_shared_memory_status()}
    assert rin.name not in names and rout.name not in names


def test_out_of_bounds_and_wrong_byte_size_are_400(tc):
    x = np.arange(8, dtype=np.float64)
    idx = np.array([0, 0, 1, 1, 1, 2, 2, 2], np.int32)
    reg = Region(tc, "bad", 128)
    try:
        shm.set_shared_memory_region(reg.handle, [x])

        def infer(x_size, x_off, out=None):
            tx = th.InferInput("x", [8], "FP64")
            tx.set_shared_memory(reg.name, x_size, offset=x_off)
            ti = th.InferInput("idx", [8], "INT32")
            ti.set_data_from_numpy(idx)
            tn = th.InferInput("num_segments", [1], "INT64")
            tn.set_data_from_numpy(np.array([3], np.int64))
            return tc.infer("segmented_sum_forward", [tx, ti, tn], outputs=out)

        assert infer(64, 0).as_numpy("out").tolist() == [1.0, 9.0, 18.0]
        cases = [
            (lambda: infer(64, 96), ["x", reg.name, "[96, 160)", "outside"]),  # 96 + 64 > 128
            (lambda: infer(56, 0), ["x", "shared_memory_byte_size", "56", "64"]),  # 7 of 8 numbers
        ]
        small = th.InferRequestedOutput("out")
        small.set_shared_memory(reg.name, 16, offset=64)  # out is 3 float64s: 24 bytes
        cases.append((lambda: infer(64, 0, [small]), ["out", "shared_memory_byte_size", "16", "24"]))
        late = th.InferRequestedOutput("out")
        late.set_shared_memory(reg.name, 24, offset=120)  # 120 + 24 > 128
        cases.append((lambda: infer(64, 0, [late]), ["out", reg.name, "[120, 144)", "outside"]))

        def ns_in_shm():
            tn = th.InferInput("num_segments", [1], "INT64")
            tn.set_shared_memory(reg.name, 8)
            tx = th.InferInput("x", [8], "FP64")
            tx.set_shared_memory(reg.name, 64)
            ti = th.InferInput("idx", [8], "INT32")
            ti.set_data_from_numpy(idx)
            return tc.infer("segmented_sum_forward", [tx, ti, tn])

        cases.append((ns_in_shm, ["num_segments", "inline"]))
        for call_, words in cases:
            with pytest.raises(InferenceServerException) as e:
                call_()
            msg = e.value.message()
            assert e.value.status() == "400" and msg.startswith("segmented_sum"), (e.value.status(), msg)
            assert all(w in msg for w in words), (msg, words)
    finally:
        reg.close()
