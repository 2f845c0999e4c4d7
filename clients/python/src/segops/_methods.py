"""_methods.py: the methods of segops.Client, one per function of the op table.
Generated from _table.py by clients/python/gen_functions.py; CTest python_functions_current fails
when it is stale. Do not edit: change the table or the generator."""
# fmt: off
from __future__ import annotations  # signatures read `x: ArrayLike`, not numpy's expansion of it

from typing import Any, Callable, Optional, Sequence, Tuple, Union, overload

import numpy as np
from numpy.typing import ArrayLike


class FunctionMethods:
    """Mixed into segops.Client: each method hands its arguments to Client._run (the C extension's
    call, or the pure-Python client's) as (function id, inputs, idx, num_segments, outputs)."""

    _run: Callable[..., Any]  # segops.Client sets it

    def segmented_sum(self, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_sum forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `idx` (N,)
        int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(0, (x,), idx, num_segments, outputs)

    def segmented_sum_backward(self, g_out: ArrayLike, x: Optional[ArrayLike], idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_sum backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`
        (not read by the formula: may be None; checked when given); `idx` (N,) int32 or int64;
        `num_segments` S >= 0. Returns `grad_x`. Arrays may be numpy arrays or anything
        np.asarray takes; errors raise segops.SegopsError."""
        return self._run(1, (g_out, x), idx, num_segments, outputs)

    def segmented_sum_double_backward(self, gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: Optional[ArrayLike], idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_sum double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
        (None: zeros, not sent); `g_out` (not read by the formula: may be None; checked when
        given); `x` (not read by the formula: may be None; checked when given); `idx` (N,) int32
        or int64; `num_segments` S >= 0. Returns `grad_g_out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(2, (gg_x, g_out, x), idx, num_segments, outputs)

    def segmented_dot(self, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_dot forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `y`; `idx`
        (N,) int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(3, (x, y), idx, num_segments, outputs)

    @overload
    def segmented_dot_backward(self, g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: None = None) -> Tuple[np.ndarray, np.ndarray]: ...

    @overload
    def segmented_dot_backward(self, g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Sequence[str]) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...

    def segmented_dot_backward(self, g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """segmented_dot backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`;
        `y`; `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_x`, `grad_y`); with
        `outputs`, only those, in the order asked (one: an array). Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(4, (g_out, x, y), idx, num_segments, outputs)

    @overload
    def segmented_dot_double_backward(self, gg_x: Optional[ArrayLike], gg_y: Optional[ArrayLike], g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: None = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    @overload
    def segmented_dot_double_backward(self, gg_x: Optional[ArrayLike], gg_y: Optional[ArrayLike], g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Sequence[str]) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...

    def segmented_dot_double_backward(self, gg_x: Optional[ArrayLike], gg_y: Optional[ArrayLike], g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """segmented_dot double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
        (None: zeros, not sent); `gg_y` (None: zeros, not sent); `g_out`; `x`; `y`; `idx` (N,)
        int32 or int64; `num_segments` S >= 0. Returns (`grad_g_out`, `grad_x`, `grad_y`); with
        `outputs`, only those, in the order asked (one: an array). Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(5, (gg_x, gg_y, g_out, x, y), idx, num_segments, outputs)

    def segmented_mul(self, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_mul forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `y`; `idx`
        (N,) int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(6, (x, y), idx, num_segments, outputs)

    @overload
    def segmented_mul_backward(self, g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: None = None) -> Tuple[np.ndarray, np.ndarray]: ...

    @overload
    def segmented_mul_backward(self, g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Sequence[str]) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...

    def segmented_mul_backward(self, g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """segmented_mul backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`;
        `y`; `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_x`, `grad_y`); with
        `outputs`, only those, in the order asked (one: an array). Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(7, (g_out, x, y), idx, num_segments, outputs)

    @overload
    def segmented_mul_double_backward(self, gg_x: Optional[ArrayLike], gg_y: Optional[ArrayLike], g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: None = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    @overload
    def segmented_mul_double_backward(self, gg_x: Optional[ArrayLike], gg_y: Optional[ArrayLike], g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Sequence[str]) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...

    def segmented_mul_double_backward(self, gg_x: Optional[ArrayLike], gg_y: Optional[ArrayLike], g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """segmented_mul double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
        (None: zeros, not sent); `gg_y` (None: zeros, not sent); `g_out`; `x`; `y`; `idx` (N,)
        int32 or int64; `num_segments` S >= 0. Returns (`grad_g_out`, `grad_x`, `grad_y`); with
        `outputs`, only those, in the order asked (one: an array). Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(8, (gg_x, gg_y, g_out, x, y), idx, num_segments, outputs)

    def segmented_mean(self, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_mean forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `idx` (N,)
        int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(9, (x,), idx, num_segments, outputs)

    def segmented_mean_backward(self, g_out: ArrayLike, x: Optional[ArrayLike], idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_mean backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`
        (not read by the formula: may be None; checked when given); `idx` (N,) int32 or int64;
        `num_segments` S >= 0. Returns `grad_x`. Arrays may be numpy arrays or anything
        np.asarray takes; errors raise segops.SegopsError."""
        return self._run(10, (g_out, x), idx, num_segments, outputs)

    def segmented_mean_double_backward(self, gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: Optional[ArrayLike], idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_mean double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
        (None: zeros, not sent); `g_out` (not read by the formula: may be None; checked when
        given); `x` (not read by the formula: may be None; checked when given); `idx` (N,) int32
        or int64; `num_segments` S >= 0. Returns `grad_g_out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(11, (gg_x, g_out, x), idx, num_segments, outputs)

    def segmented_rms_norm(self, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_rms_norm forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `idx`
        (N,) int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(12, (x,), idx, num_segments, outputs)

    def segmented_rms_norm_backward(self, g_out: ArrayLike, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_rms_norm backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`;
        `x`; `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns `grad_x`. Arrays may be
        numpy arrays or anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(13, (g_out, x), idx, num_segments, outputs)

    @overload
    def segmented_rms_norm_double_backward(self, gg_x: Optional[ArrayLike], g_out: ArrayLike, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: None = None) -> Tuple[np.ndarray, np.ndarray]: ...

    @overload
    def segmented_rms_norm_double_backward(self, gg_x: Optional[ArrayLike], g_out: ArrayLike, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Sequence[str]) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...

    def segmented_rms_norm_double_backward(self, gg_x: Optional[ArrayLike], g_out: ArrayLike, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """segmented_rms_norm double_backward on the daemon (proto/API.md, Formulas). Arguments:
        `gg_x` (None: zeros, not sent); `g_out`; `x`; `idx` (N,) int32 or int64; `num_segments` S
        >= 0. Returns (`grad_g_out`, `grad_x`); with `outputs`, only those, in the order asked
        (one: an array). Arrays may be numpy arrays or anything np.asarray takes; errors raise
        segops.SegopsError."""
        return self._run(14, (gg_x, g_out, x), idx, num_segments, outputs)

    def segmented_matvec(self, v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_matvec forward on the daemon (proto/API.md, Formulas). Arguments: `v`; `m`;
        `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy
        arrays or anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(15, (v, m), idx, num_segments, outputs)

    @overload
    def segmented_matvec_backward(self, g_out: ArrayLike, v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: None = None) -> Tuple[np.ndarray, np.ndarray]: ...

    @overload
    def segmented_matvec_backward(self, g_out: ArrayLike, v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Sequence[str]) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...

    def segmented_matvec_backward(self, g_out: ArrayLike, v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """segmented_matvec backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`;
        `v`; `m`; `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_v`, `grad_m`);
        with `outputs`, only those, in the order asked (one: an array). Arrays may be numpy
        arrays or anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(16, (g_out, v, m), idx, num_segments, outputs)

    @overload
    def segmented_matvec_double_backward(self, gg_v: Optional[ArrayLike], gg_m: Optional[ArrayLike], g_out: ArrayLike, v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: None = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    @overload
    def segmented_matvec_double_backward(self, gg_v: Optional[ArrayLike], gg_m: Optional[ArrayLike], g_out: ArrayLike, v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Sequence[str]) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...

    def segmented_matvec_double_backward(self, gg_v: Optional[ArrayLike], gg_m: Optional[ArrayLike], g_out: ArrayLike, v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """segmented_matvec double_backward on the daemon (proto/API.md, Formulas). Arguments:
        `gg_v` (None: zeros, not sent); `gg_m` (None: zeros, not sent); `g_out`; `v`; `m`; `idx`
        (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_g_out`, `grad_v`, `grad_m`);
        with `outputs`, only those, in the order asked (one: an array). Arrays may be numpy
        arrays or anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(17, (gg_v, gg_m, g_out, v, m), idx, num_segments, outputs)

    def segmented_max(self, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_max forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `idx` (N,)
        int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(18, (x,), idx, num_segments, outputs)

    def segmented_max_backward(self, g_out: ArrayLike, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_max backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`;
        `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns `grad_x`. Arrays may be numpy
        arrays or anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(19, (g_out, x), idx, num_segments, outputs)

    @overload
    def segmented_max_double_backward(self, gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: None = None) -> Tuple[np.ndarray, np.ndarray]: ...

    @overload
    def segmented_max_double_backward(self, gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Sequence[str]) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...

    def segmented_max_double_backward(self, gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """segmented_max double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
        (None: zeros, not sent); `g_out` (not read by the formula: may be None; checked when
        given); `x`; `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_g_out`,
        `grad_x`); with `outputs`, only those, in the order asked (one: an array). Arrays may be
        numpy arrays or anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(20, (gg_x, g_out, x), idx, num_segments, outputs)

    def segmented_min(self, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_min forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `idx` (N,)
        int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(21, (x,), idx, num_segments, outputs)

    def segmented_min_backward(self, g_out: ArrayLike, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_min backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`;
        `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns `grad_x`. Arrays may be numpy
        arrays or anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(22, (g_out, x), idx, num_segments, outputs)

    @overload
    def segmented_min_double_backward(self, gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: None = None) -> Tuple[np.ndarray, np.ndarray]: ...

    @overload
    def segmented_min_double_backward(self, gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Sequence[str]) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...

    def segmented_min_double_backward(self, gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """segmented_min double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
        (None: zeros, not sent); `g_out` (not read by the formula: may be None; checked when
        given); `x`; `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_g_out`,
        `grad_x`); with `outputs`, only those, in the order asked (one: an array). Arrays may be
        numpy arrays or anything np.asarray takes; errors raise segops.SegopsError."""
        return self._run(23, (gg_x, g_out, x), idx, num_segments, outputs)
