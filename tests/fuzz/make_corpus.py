#!/usr/bin/env python3
"""make_corpus.py: writes the fuzz seed corpus (tests/fuzz/corpus/{msgpack,json,prepare}/) from the
example bodies of proto/examples (SPEC §5 and GOLDEN.md cases). The first byte of each seed picks
(op, pass) as fuzz_common.h reads it; for the prepare target bit 7 selects JSON.
Run: python3 tests/fuzz/make_corpus.py  (needs numpy and msgpack). The seeds are committed."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "proto", "examples"))
import make_examples  # noqa: E402

OPS = ["segmented_sum", "segmented_dot", "segmented_mul", "segmented_mean", "segmented_rms_norm",
       "segmented_matvec"]
PASSES = ["forward", "backward", "double_backward"]


def write(kind, name, data):
    d = os.path.join(HERE, "corpus", kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    for case in make_examples.CASES:
        fn = OPS.index(case[0]) * 3 + PASSES.index(case[1])
        jtext, mbytes = make_examples.bodies(case)
        stem = f"{case[0]}.{case[1]}"
        write("msgpack", stem, bytes([fn]) + mbytes)
        write("json", stem, bytes([fn]) + jtext.encode())
        write("prepare", stem + ".m", bytes([fn]) + mbytes)
        write("prepare", stem + ".j", bytes([fn | 0x80]) + jtext.encode())
    write("json", "spec_example", bytes([0]) + make_examples.spec_example().encode())
    write("json", "map_form", bytes([0]) + make_examples.map_form_example().encode())
    write("prepare", "map_form.j", bytes([0x80]) + make_examples.map_form_example().encode())
    # A few shapes the examples do not have: deep nesting, trailing bytes, huge counts.
    write("json", "deep", bytes([0]) + b'{"x":[[[[[[[[[[1]]]]]]]]]]}')
    write("msgpack", "trailing", bytes([0]) + b"\x80\x00")
    write("msgpack", "huge_array", bytes([0]) + b"\x81\xa1x\xdd\xff\xff\xff\xff\x00")


if __name__ == "__main__":
    main()
