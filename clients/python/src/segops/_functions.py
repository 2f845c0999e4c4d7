"""_functions.py: the module functions segops.<function>(...), each on segops.default_client().
Generated from _table.py by clients/python/gen_functions.py; CTest python_functions_current fails
when it is stale. Do not edit: change the table or the generator."""
# fmt: off
from __future__ import annotations  # signatures read `x: ArrayLike`, not numpy's expansion of it

from typing import Optional, Sequence, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike

from ._default import default_client

NAMES = ('segmented_sum', 'segmented_sum_backward', 'segmented_sum_double_backward', 'segmented_dot', 'segmented_dot_backward', 'segmented_dot_double_backward', 'segmented_mul', 'segmented_mul_backward', 'segmented_mul_double_backward', 'segmented_mean', 'segmented_mean_backward', 'segmented_mean_double_backward', 'segmented_rms_norm', 'segmented_rms_norm_backward', 'segmented_rms_norm_double_backward', 'segmented_matvec', 'segmented_matvec_backward', 'segmented_matvec_double_backward', 'segmented_max', 'segmented_max_backward', 'segmented_max_double_backward', 'segmented_min', 'segmented_min_backward', 'segmented_min_double_backward')


def segmented_sum(x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_sum forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `idx` (N,)
    int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or anything
    np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_sum(x, idx, num_segments, outputs=outputs)


def segmented_sum_backward(g_out: ArrayLike, x: Optional[ArrayLike], idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_sum backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x` (not
    read by the formula: may be None; checked when given); `idx` (N,) int32 or int64;
    `num_segments` S >= 0. Returns `grad_x`. Arrays may be numpy arrays or anything np.asarray
    takes; errors raise segops.SegopsError."""
    return default_client().segmented_sum_backward(g_out, x, idx, num_segments, outputs=outputs)


def segmented_sum_double_backward(gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: Optional[ArrayLike], idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_sum double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
    (None: zeros, not sent); `g_out` (not read by the formula: may be None; checked when given);
    `x` (not read by the formula: may be None; checked when given); `idx` (N,) int32 or int64;
    `num_segments` S >= 0. Returns `grad_g_out`. Arrays may be numpy arrays or anything
    np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_sum_double_backward(gg_x, g_out, x, idx, num_segments, outputs=outputs)


def segmented_dot(x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_dot forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `y`; `idx` (N,)
    int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or anything
    np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_dot(x, y, idx, num_segments, outputs=outputs)


def segmented_dot_backward(g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
    """segmented_dot backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`; `y`;
    `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_x`, `grad_y`); with
    `outputs`, only those, in the order asked (one: an array). Arrays may be numpy arrays or
    anything np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_dot_backward(g_out, x, y, idx, num_segments, outputs=outputs)


def segmented_dot_double_backward(gg_x: Optional[ArrayLike], gg_y: Optional[ArrayLike], g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
    """segmented_dot double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
    (None: zeros, not sent); `gg_y` (None: zeros, not sent); `g_out`; `x`; `y`; `idx` (N,) int32
    or int64; `num_segments` S >= 0. Returns (`grad_g_out`, `grad_x`, `grad_y`); with `outputs`,
    only those, in the order asked (one: an array). Arrays may be numpy arrays or anything
    np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_dot_double_backward(gg_x, gg_y, g_out, x, y, idx, num_segments, outputs=outputs)


def segmented_mul(x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_mul forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `y`; `idx` (N,)
    int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or anything
    np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_mul(x, y, idx, num_segments, outputs=outputs)


def segmented_mul_backward(g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
    """segmented_mul backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`; `y`;
    `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_x`, `grad_y`); with
    `outputs`, only those, in the order asked (one: an array). Arrays may be numpy arrays or
    anything np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_mul_backward(g_out, x, y, idx, num_segments, outputs=outputs)


def segmented_mul_double_backward(gg_x: Optional[ArrayLike], gg_y: Optional[ArrayLike], g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
    """segmented_mul double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
    (None: zeros, not sent); `gg_y` (None: zeros, not sent); `g_out`; `x`; `y`; `idx` (N,) int32
    or int64; `num_segments` S >= 0. Returns (`grad_g_out`, `grad_x`, `grad_y`); with `outputs`,
    only those, in the order asked (one: an array). Arrays may be numpy arrays or anything
    np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_mul_double_backward(gg_x, gg_y, g_out, x, y, idx, num_segments, outputs=outputs)


def segmented_mean(x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_mean forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `idx` (N,)
    int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or anything
    np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_mean(x, idx, num_segments, outputs=outputs)


def segmented_mean_backward(g_out: ArrayLike, x: Optional[ArrayLike], idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_mean backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x` (not
    read by the formula: may be None; checked when given); `idx` (N,) int32 or int64;
    `num_segments` S >= 0. Returns `grad_x`. Arrays may be numpy arrays or anything np.asarray
    takes; errors raise segops.SegopsError."""
    return default_client().segmented_mean_backward(g_out, x, idx, num_segments, outputs=outputs)


def segmented_mean_double_backward(gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: Optional[ArrayLike], idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_mean double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
    (None: zeros, not sent); `g_out` (not read by the formula: may be None; checked when given);
    `x` (not read by the formula: may be None; checked when given); `idx` (N,) int32 or int64;
    `num_segments` S >= 0. Returns `grad_g_out`. Arrays may be numpy arrays or anything
    np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_mean_double_backward(gg_x, g_out, x, idx, num_segments, outputs=outputs)


def segmented_rms_norm(x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_rms_norm forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `idx` (N,)
    int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or anything
    np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_rms_norm(x, idx, num_segments, outputs=outputs)


def segmented_rms_norm_backward(g_out: ArrayLike, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_rms_norm backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`;
    `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns `grad_x`. Arrays may be numpy
    arrays or anything np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_rms_norm_backward(g_out, x, idx, num_segments, outputs=outputs)


def segmented_rms_norm_double_backward(gg_x: Optional[ArrayLike], g_out: ArrayLike, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
    """segmented_rms_norm double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
    (None: zeros, not sent); `g_out`; `x`; `idx` (N,) int32 or int64; `num_segments` S >= 0.
    Returns (`grad_g_out`, `grad_x`); with `outputs`, only those, in the order asked (one: an
    array). Arrays may be numpy arrays or anything np.asarray takes; errors raise
    segops.SegopsError."""
    return default_client().segmented_rms_norm_double_backward(gg_x, g_out, x, idx, num_segments, outputs=outputs)


def segmented_matvec(v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_matvec forward on the daemon (proto/API.md, Formulas). Arguments: `v`; `m`; `idx`
    (N,) int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or
    anything np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_matvec(v, m, idx, num_segments, outputs=outputs)


def segmented_matvec_backward(g_out: ArrayLike, v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
    """segmented_matvec backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `v`;
    `m`; `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_v`, `grad_m`); with
    `outputs`, only those, in the order asked (one: an array). Arrays may be numpy arrays or
    anything np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_matvec_backward(g_out, v, m, idx, num_segments, outputs=outputs)


def segmented_matvec_double_backward(gg_v: Optional[ArrayLike], gg_m: Optional[ArrayLike], g_out: ArrayLike, v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
    """segmented_matvec double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_v`
    (None: zeros, not sent); `gg_m` (None: zeros, not sent); `g_out`; `v`; `m`; `idx` (N,) int32
    or int64; `num_segments` S >= 0. Returns (`grad_g_out`, `grad_v`, `grad_m`); with `outputs`,
    only those, in the order asked (one: an array). Arrays may be numpy arrays or anything
    np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_matvec_double_backward(gg_v, gg_m, g_out, v, m, idx, num_segments, outputs=outputs)


def segmented_max(x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_max forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `idx` (N,)
    int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or anything
    np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_max(x, idx, num_segments, outputs=outputs)


def segmented_max_backward(g_out: ArrayLike, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_max backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`; `idx`
    (N,) int32 or int64; `num_segments` S >= 0. Returns `grad_x`. Arrays may be numpy arrays or
    anything np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_max_backward(g_out, x, idx, num_segments, outputs=outputs)


def segmented_max_double_backward(gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
    """segmented_max double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
    (None: zeros, not sent); `g_out` (not read by the formula: may be None; checked when given);
    `x`; `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_g_out`, `grad_x`); with
    `outputs`, only those, in the order asked (one: an array). Arrays may be numpy arrays or
    anything np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_max_double_backward(gg_x, g_out, x, idx, num_segments, outputs=outputs)


def segmented_min(x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_min forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `idx` (N,)
    int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or anything
    np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_min(x, idx, num_segments, outputs=outputs)


def segmented_min_backward(g_out: ArrayLike, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
    """segmented_min backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`; `idx`
    (N,) int32 or int64; `num_segments` S >= 0. Returns `grad_x`. Arrays may be numpy arrays or
    anything np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_min_backward(g_out, x, idx, num_segments, outputs=outputs)


def segmented_min_double_backward(gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
    """segmented_min double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
    (None: zeros, not sent); `g_out` (not read by the formula: may be None; checked when given);
    `x`; `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_g_out`, `grad_x`); with
    `outputs`, only those, in the order asked (one: an array). Arrays may be numpy arrays or
    anything np.asarray takes; errors raise segops.SegopsError."""
    return default_client().segmented_min_double_backward(gg_x, g_out, x, idx, num_segments, outputs=outputs)
