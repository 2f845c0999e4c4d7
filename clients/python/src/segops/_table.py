"""_table.py: the op table of proto/API.md as the client sees it, generated from core/ops.def and
core/ops.c (scripts/gen_optable.py writes the section between the markers; CTest
optable_generated_files checks it), so that the package installs without building C.

One row per (op, pass): the input names in the wire order (cotangents gg_<a>, then g_out,
then the forward inputs), how each is used, and the output names in table order. Every
client method, every torch autograd Function and `Client.info()` checks derive from this.
"""

REQ = "req"  # read by the formula: must be given
COT = "cot"  # a double-backward cotangent: may be None (zeros), then not sent
UNR = "unread"  # not read by the formula: may be None (not sent); validated by the server when given

# BEGIN generated: client table (scripts/gen_optable.py; edit core/ops.def and core/ops.c instead)
PASSES = ("forward", "backward", "double_backward")

# op -> (forward input names, vec3_only)
OPS = {
    "segmented_sum": (("x",), False),
    "segmented_dot": (("x", "y"), False),
    "segmented_mul": (("x", "y"), False),
    "segmented_mean": (("x",), False),
    "segmented_rms_norm": (("x",), False),
    "segmented_matvec": (("v", "m"), True),
    "segmented_max": (("x",), False),
    "segmented_min": (("x",), False),
}

# (op, pass) -> (((input name, use), ...), (output name, ...))
FUNCS = {
    ("segmented_sum", "forward"): ((("x", REQ),), ("out",)),
    ("segmented_sum", "backward"): ((("g_out", REQ), ("x", UNR)), ("grad_x",)),
    ("segmented_sum", "double_backward"): ((("gg_x", COT), ("g_out", UNR), ("x", UNR)), ("grad_g_out",)),
    ("segmented_dot", "forward"): ((("x", REQ), ("y", REQ)), ("out",)),
    ("segmented_dot", "backward"): ((("g_out", REQ), ("x", REQ), ("y", REQ)), ("grad_x", "grad_y")),
    ("segmented_dot", "double_backward"): (
        (("gg_x", COT), ("gg_y", COT), ("g_out", REQ), ("x", REQ), ("y", REQ)),
        ("grad_g_out", "grad_x", "grad_y"),
    ),
    ("segmented_mul", "forward"): ((("x", REQ), ("y", REQ)), ("out",)),
    ("segmented_mul", "backward"): ((("g_out", REQ), ("x", REQ), ("y", REQ)), ("grad_x", "grad_y")),
    ("segmented_mul", "double_backward"): (
        (("gg_x", COT), ("gg_y", COT), ("g_out", REQ), ("x", REQ), ("y", REQ)),
        ("grad_g_out", "grad_x", "grad_y"),
    ),
    ("segmented_mean", "forward"): ((("x", REQ),), ("out",)),
    ("segmented_mean", "backward"): ((("g_out", REQ), ("x", UNR)), ("grad_x",)),
    ("segmented_mean", "double_backward"): ((("gg_x", COT), ("g_out", UNR), ("x", UNR)), ("grad_g_out",)),
    ("segmented_rms_norm", "forward"): ((("x", REQ),), ("out",)),
    ("segmented_rms_norm", "backward"): ((("g_out", REQ), ("x", REQ)), ("grad_x",)),
    ("segmented_rms_norm", "double_backward"): (
        (("gg_x", COT), ("g_out", REQ), ("x", REQ)),
        ("grad_g_out", "grad_x"),
    ),
    ("segmented_matvec", "forward"): ((("v", REQ), ("m", REQ)), ("out",)),
    ("segmented_matvec", "backward"): ((("g_out", REQ), ("v", REQ), ("m", REQ)), ("grad_v", "grad_m")),
    ("segmented_matvec", "double_backward"): (
        (("gg_v", COT), ("gg_m", COT), ("g_out", REQ), ("v", REQ), ("m", REQ)),
        ("grad_g_out", "grad_v", "grad_m"),
    ),
    ("segmented_max", "forward"): ((("x", REQ),), ("out",)),
    ("segmented_max", "backward"): ((("g_out", REQ), ("x", REQ)), ("grad_x",)),
    ("segmented_max", "double_backward"): (
        (("gg_x", COT), ("g_out", UNR), ("x", REQ)),
        ("grad_g_out", "grad_x"),
    ),
    ("segmented_min", "forward"): ((("x", REQ),), ("out",)),
    ("segmented_min", "backward"): ((("g_out", REQ), ("x", REQ)), ("grad_x",)),
    ("segmented_min", "double_backward"): (
        (("gg_x", COT), ("g_out", UNR), ("x", REQ)),
        ("grad_g_out", "grad_x"),
    ),
}

# Shapes, as segops.torch's fake (meta) implementations and vmap rules need them.
# op -> {forward input: its leading dimension, "N" (elements) or "S" (segments)}
LEADS = {
    "segmented_sum": {"x": "N"},
    "segmented_dot": {"x": "N", "y": "N"},
    "segmented_mul": {"x": "N", "y": "S"},
    "segmented_mean": {"x": "N"},
    "segmented_rms_norm": {"x": "N"},
    "segmented_matvec": {"v": "N", "m": "S"},
    "segmented_max": {"x": "N"},
    "segmented_min": {"x": "N"},
}
# op -> (leading dimension of the forward's `out`, the forward input whose trailing
# dimensions `out` has, or None for none): e.g. sum's out is (S,) + x.shape[1:].
OUT_SHAPE = {
    "segmented_sum": ("S", "x"),
    "segmented_dot": ("S", None),
    "segmented_mul": ("N", "x"),
    "segmented_mean": ("S", "x"),
    "segmented_rms_norm": ("S", None),
    "segmented_matvec": ("N", "v"),
    "segmented_max": ("S", "x"),
    "segmented_min": ("S", "x"),
}
# END generated: client table

assert len(FUNCS) == len(OPS) * len(PASSES), "every op has every pass"


def method_name(op, pass_):
    """Client method name of a function: the op name for the forward, else `<op>_<pass>`."""
    return op if pass_ == "forward" else f"{op}_{pass_}"


def input_names(op, pass_):
    return tuple(name for name, _ in FUNCS[(op, pass_)][0])


def output_names(op, pass_):
    return FUNCS[(op, pass_)][1]

assert set(LEADS) == set(OPS) == set(OUT_SHAPE)


def lead_of(op, name):
    """Leading dimension ("N" or "S") of any tensor argument or output of op's functions:
    a forward input a, gg_a and grad_a lead like a; out, g_out and grad_g_out like out."""
    base = name
    for prefix in ("grad_", "gg_"):
        if base.startswith(prefix):
            base = base[len(prefix) :]
    if base in ("out", "g_out"):
        return OUT_SHAPE[op][0]
    return LEADS[op][base]
