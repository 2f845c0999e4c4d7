#!/usr/bin/env python3
"""gen_functions.py: writes the 24 functions' Python source from the client's op table
(src/segops/_table.py), so that every one has a real signature, type hints and a docstring that
editors, help() and type checkers see:

    src/segops/_methods.py     class FunctionMethods: the methods of segops.Client
    src/segops/_functions.py   the module functions segops.segmented_sum(...) on the default client

    python3 clients/python/gen_functions.py            # rewrite both
    python3 clients/python/gen_functions.py --check    # exit 1 when either is stale (CTest)
"""
import os
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "src", "segops")
sys.path.insert(0, SRC)
import _table  # noqa: E402  (the table alone: no package import, no numpy)

HEADER = '''"""{name}: {what}
Generated from _table.py by clients/python/gen_functions.py; CTest python_functions_current fails
when it is stale. Do not edit: change the table or the generator."""
# fmt: off
from __future__ import annotations  # signatures read `x: ArrayLike`, not numpy's expansion of it

'''

USE_WORDS = {
    _table.REQ: "",
    _table.COT: " (None: zeros, not sent)",
    _table.UNR: " (not read by the formula: may be None; checked when given)",
}


def signature(op, pass_, self_arg):
    row, outs = _table.FUNCS[(op, pass_)]
    params = [f"{n}: ArrayLike" if use == _table.REQ else f"{n}: Optional[ArrayLike]" for n, use in row]
    params += ["idx: ArrayLike", "num_segments: int"]
    head = ["self"] if self_arg else []
    return ", ".join(head + params) + ", *, outputs: Optional[Sequence[str]] = None"


def returns(outs):
    return "np.ndarray" if len(outs) == 1 else "Tuple[" + ", ".join(["np.ndarray"] * len(outs)) + "]"


def docstring(op, pass_, indent):
    row, outs = _table.FUNCS[(op, pass_)]
    args = "; ".join(f"`{n}`{USE_WORDS[use]}" for n, use in row)
    ret = f"`{outs[0]}`" if len(outs) == 1 else "(" + ", ".join(f"`{o}`" for o in outs) + ")"
    text = (f"{op} {pass_} on the daemon (proto/API.md, Formulas). Arguments: {args}; `idx` (N,) int32 or "
            f"int64; `num_segments` S >= 0. Returns {ret}"
            + ("." if len(outs) == 1 else "; with `outputs`, only those, in the order asked (one: an array).")
            + " Arrays may be numpy arrays or anything np.asarray takes; errors raise segops.SegopsError.")
    pad = " " * indent
    lines = textwrap.wrap(text, 100 - indent - 3)
    return pad + '"""' + ("\n" + pad).join(lines) + '"""'


def run_args(op, pass_):
    """The arguments of Client._run: the function's id (the op table's order, libsegops' SEGOPS_FN_*),
    the inputs as one tuple, idx, num_segments, outputs."""
    row, _ = _table.FUNCS[(op, pass_)]
    fn = list(_table.FUNCS).index((op, pass_))
    ins = ", ".join(n for n, _ in row) + ("," if len(row) == 1 else "")
    return f"{fn}, ({ins}), idx, num_segments, outputs"


def call_args(op, pass_):
    row, _ = _table.FUNCS[(op, pass_)]
    return ", ".join([n for n, _ in row] + ["idx", "num_segments", "outputs=outputs"])


def methods_source():
    out = [HEADER.format(name="_methods.py", what="the methods of segops.Client, one per function of the op table.")]
    out.append("from typing import Any, Callable, Optional, Sequence, Tuple, Union, overload\n\n"
               "import numpy as np\nfrom numpy.typing import ArrayLike\n\n\n"
               "class FunctionMethods:\n"
               '    """Mixed into segops.Client: each method hands its arguments to Client._run (the C extension\'s\n'
               '    call, or the pure-Python client\'s) as (function id, inputs, idx, num_segments, outputs)."""\n\n'
               "    _run: Callable[..., Any]  # segops.Client sets it\n")
    for (op, pass_), (row, outs) in _table.FUNCS.items():
        name = _table.method_name(op, pass_)
        body = f'        return self._run({run_args(op, pass_)})\n'
        sig = signature(op, pass_, True)
        if len(outs) == 1:
            out.append(f"\n    def {name}({sig}) -> np.ndarray:\n{docstring(op, pass_, 8)}\n{body}")
            continue
        none_sig = sig.replace("outputs: Optional[Sequence[str]] = None", "outputs: None = None")
        some_sig = sig.replace("outputs: Optional[Sequence[str]] = None", "outputs: Sequence[str]")
        out.append(f"\n    @overload\n    def {name}({none_sig}) -> {returns(outs)}: ...\n")
        out.append(f"\n    @overload\n    def {name}({some_sig}) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...\n")
        out.append(f"\n    def {name}({sig}) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:\n"
                   f"{docstring(op, pass_, 8)}\n{body}")
    return "".join(out)


def functions_source():
    out = [HEADER.format(name="_functions.py",
                         what="the module functions segops.<function>(...), each on segops.default_client().")]
    out.append("from typing import Optional, Sequence, Tuple, Union\n\n"
               "import numpy as np\nfrom numpy.typing import ArrayLike\n\n"
               "from ._default import default_client\n\n"
               f"NAMES = {tuple(_table.method_name(op, p) for op, p in _table.FUNCS)!r}\n")
    for (op, pass_), (row, outs) in _table.FUNCS.items():
        name = _table.method_name(op, pass_)
        ret = "np.ndarray" if len(outs) == 1 else "Union[np.ndarray, Tuple[np.ndarray, ...]]"
        out.append(f"\n\ndef {name}({signature(op, pass_, False)}) -> {ret}:\n{docstring(op, pass_, 4)}\n"
                   f"    return default_client().{name}({call_args(op, pass_)})\n")
    return "".join(out)


def main():
    check = sys.argv[1:] == ["--check"]
    stale = []
    for fname, text in (("_methods.py", methods_source()), ("_functions.py", functions_source())):
        path = os.path.join(SRC, fname)
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old == text:
            continue
        if check:
            stale.append(path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            print("wrote", path)
    for p in stale:
        print(f"FAIL: {p} is stale; regenerate: python3 clients/python/gen_functions.py")
    if check and not stale:
        print("ok: _methods.py and _functions.py match _table.py")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
