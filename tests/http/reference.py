"""reference.py: random inputs for every function as /v1/info describes it; the float64
reference of proto/API.md's formulas itself is the tests' shared one (tests/segref.py)."""
import numpy as np
from segref import reference

__all__ = ["reference", "shape_of", "random_case"]


def shape_of(shape_text, width, N, S):
    """Concrete shape for a /v1/info shape text like '(N,) or (N,3)'."""
    t = shape_text.replace(" ", "")
    lead = N if t.startswith("(N") else S
    if t in ("(N,)or(N,3)", "(S,)or(S,3)", "(N,*F)", "(S,*F)"):
        return (lead,) if width == 1 else (lead, 3)
    if t == "(S,)or(S,*F)":
        return (S,)
    if t in ("(N,3)", "(S,3)"):
        return (lead, 3)
    if t in ("(N,)", "(S,)"):
        return (lead,)
    if t == "(S,3,3)":
        return (S, 3, 3)
    raise ValueError(shape_text)


def random_case(rng, fn_info, width, N=37, S=7, omit_optional=False):
    """omit_optional leaves out the cotangents (they then mean zeros)."""
    """Random float64 inputs for one function of /v1/info, an unsorted idx with an empty segment."""
    idx = rng.integers(0, S - 1, size=N).astype(np.int32)  # segment S-1 stays empty
    idx[rng.integers(0, N)] = 0
    args = {}
    for inp in fn_info["inputs"]:
        name = inp["name"]
        if name in ("idx", "num_segments"):
            continue
        if omit_optional and inp["use"] == "cotangent":
            continue
        args[name] = rng.standard_normal(shape_of(inp["shape"], width, N, S))
    return args, idx, S
