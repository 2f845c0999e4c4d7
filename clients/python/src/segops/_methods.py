"""_methods.py: the methods of segops.Client, one per function of the op table.
Generated from _table.py by clients/python/gen_functions.py; CTest python_functions_current fails
when it is stale. Do not edit: change the table or the generator."""
# fmt: off
from __future__ import annotations  # signatures read `x: ArrayLike`, not numpy's expansion of it

from typing import Any, Dict, Optional, Sequence, Tuple, Union, overload

import numpy as np
from numpy.typing import ArrayLike


class FunctionMethods:
    """Mixed into segops.Client: each method sends its arguments through Client._function."""

    def _function(self, op: str, pass_: str, values: Dict[str, Any], outputs: Optional[Sequence[str]]) -> Any:
        raise NotImplementedError  # segops.Client implements it

    def segmented_sum(self, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_sum forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `idx` (N,)
        int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_sum", "forward", {"x": x, "idx": idx, "num_segments": num_segments}, outputs)

    def segmented_sum_backward(self, g_out: ArrayLike, x: Optional[ArrayLike], idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_sum backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`
        (not read by the formula: may be None; checked when given); `idx` (N,) int32 or int64;
        `num_segments` S >= 0. Returns `grad_x`. Arrays may be numpy arrays or anything
        np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_sum", "backward", {"g_out": g_out, "x": x, "idx": idx, "num_segments": num_segments}, outputs)

    def segmented_sum_double_backward(self, gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: Optional[ArrayLike], idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_sum double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
        (None: zeros, not sent); `g_out` (not read by the formula: may be None; checked when
        given); `x` (not read by the formula: may be None; checked when given); `idx` (N,) int32
        or int64; `num_segments` S >= 0. Returns `grad_g_out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_sum", "double_backward", {"gg_x": gg_x, "g_out": g_out, "x": x, "idx": idx, "num_segments": num_segments}, outputs)

    def segmented_dot(self, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_dot forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `y`; `idx`
        (N,) int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_dot", "forward", {"x": x, "y": y, "idx": idx, "num_segments": num_segments}, outputs)

    @overload
    def segmented_dot_backward(self, g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: None = None) -> Tuple[np.ndarray, np.ndarray]: ...

    @overload
    def segmented_dot_backward(self, g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Sequence[str]) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...

    def segmented_dot_backward(self, g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """segmented_dot backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`;
        `y`; `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_x`, `grad_y`); with
        `outputs`, only those, in the order asked (one: an array). Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_dot", "backward", {"g_out": g_out, "x": x, "y": y, "idx": idx, "num_segments": num_segments}, outputs)

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
        return self._function("segmented_dot", "double_backward", {"gg_x": gg_x, "gg_y": gg_y, "g_out": g_out, "x": x, "y": y, "idx": idx, "num_segments": num_segments}, outputs)

    def segmented_mul(self, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_mul forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `y`; `idx`
        (N,) int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_mul", "forward", {"x": x, "y": y, "idx": idx, "num_segments": num_segments}, outputs)

    @overload
    def segmented_mul_backward(self, g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: None = None) -> Tuple[np.ndarray, np.ndarray]: ...

    @overload
    def segmented_mul_backward(self, g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Sequence[str]) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...

    def segmented_mul_backward(self, g_out: ArrayLike, x: ArrayLike, y: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """segmented_mul backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`;
        `y`; `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_x`, `grad_y`); with
        `outputs`, only those, in the order asked (one: an array). Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_mul", "backward", {"g_out": g_out, "x": x, "y": y, "idx": idx, "num_segments": num_segments}, outputs)

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
        return self._function("segmented_mul", "double_backward", {"gg_x": gg_x, "gg_y": gg_y, "g_out": g_out, "x": x, "y": y, "idx": idx, "num_segments": num_segments}, outputs)

    def segmented_mean(self, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_mean forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `idx` (N,)
        int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_mean", "forward", {"x": x, "idx": idx, "num_segments": num_segments}, outputs)

    def segmented_mean_backward(self, g_out: ArrayLike, x: Optional[ArrayLike], idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_mean backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`; `x`
        (not read by the formula: may be None; checked when given); `idx` (N,) int32 or int64;
        `num_segments` S >= 0. Returns `grad_x`. Arrays may be numpy arrays or anything
        np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_mean", "backward", {"g_out": g_out, "x": x, "idx": idx, "num_segments": num_segments}, outputs)

    def segmented_mean_double_backward(self, gg_x: Optional[ArrayLike], g_out: Optional[ArrayLike], x: Optional[ArrayLike], idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_mean double_backward on the daemon (proto/API.md, Formulas). Arguments: `gg_x`
        (None: zeros, not sent); `g_out` (not read by the formula: may be None; checked when
        given); `x` (not read by the formula: may be None; checked when given); `idx` (N,) int32
        or int64; `num_segments` S >= 0. Returns `grad_g_out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_mean", "double_backward", {"gg_x": gg_x, "g_out": g_out, "x": x, "idx": idx, "num_segments": num_segments}, outputs)

    def segmented_rms_norm(self, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_rms_norm forward on the daemon (proto/API.md, Formulas). Arguments: `x`; `idx`
        (N,) int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy arrays or
        anything np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_rms_norm", "forward", {"x": x, "idx": idx, "num_segments": num_segments}, outputs)

    def segmented_rms_norm_backward(self, g_out: ArrayLike, x: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_rms_norm backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`;
        `x`; `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns `grad_x`. Arrays may be
        numpy arrays or anything np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_rms_norm", "backward", {"g_out": g_out, "x": x, "idx": idx, "num_segments": num_segments}, outputs)

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
        return self._function("segmented_rms_norm", "double_backward", {"gg_x": gg_x, "g_out": g_out, "x": x, "idx": idx, "num_segments": num_segments}, outputs)

    def segmented_matvec(self, v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> np.ndarray:
        """segmented_matvec forward on the daemon (proto/API.md, Formulas). Arguments: `v`; `m`;
        `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns `out`. Arrays may be numpy
        arrays or anything np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_matvec", "forward", {"v": v, "m": m, "idx": idx, "num_segments": num_segments}, outputs)

    @overload
    def segmented_matvec_backward(self, g_out: ArrayLike, v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: None = None) -> Tuple[np.ndarray, np.ndarray]: ...

    @overload
    def segmented_matvec_backward(self, g_out: ArrayLike, v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Sequence[str]) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...

    def segmented_matvec_backward(self, g_out: ArrayLike, v: ArrayLike, m: ArrayLike, idx: ArrayLike, num_segments: int, *, outputs: Optional[Sequence[str]] = None) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """segmented_matvec backward on the daemon (proto/API.md, Formulas). Arguments: `g_out`;
        `v`; `m`; `idx` (N,) int32 or int64; `num_segments` S >= 0. Returns (`grad_v`, `grad_m`);
        with `outputs`, only those, in the order asked (one: an array). Arrays may be numpy
        arrays or anything np.asarray takes; errors raise segops.SegopsError."""
        return self._function("segmented_matvec", "backward", {"g_out": g_out, "v": v, "m": m, "idx": idx, "num_segments": num_segments}, outputs)

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
        return self._function("segmented_matvec", "double_backward", {"gg_v": gg_v, "gg_m": gg_m, "g_out": g_out, "v": v, "m": m, "idx": idx, "num_segments": num_segments}, outputs)
