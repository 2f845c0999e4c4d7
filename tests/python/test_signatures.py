"""test_signatures.py: the public client API as editors and type checkers see it. Every function of
the op table is a Client method and a module function with a real signature (its arguments by name,
in the table's order, then idx, num_segments and a keyword-only outputs), type hints on each, and a
docstring; positional and keyword calls give the same arrays; py.typed ships beside the code; the
generated source is what clients/python/gen_functions.py makes from the table now."""
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import segops
from segops import _table

GEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "gen_functions.py")


@pytest.mark.parametrize("op,pass_", sorted(_table.FUNCS))
def test_method_and_module_function_signatures(op, pass_):
    name = _table.method_name(op, pass_)
    want = list(_table.input_names(op, pass_)) + ["idx", "num_segments"]
    for fn, lead in ((getattr(segops.Client, name), ["self"]), (getattr(segops, name), [])):
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        assert [p.name for p in params] == lead + want + ["outputs"], (name, sig)
        assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params[:-1])
        assert params[-1].kind is params[-1].KEYWORD_ONLY and params[-1].default is None
        for p in params[len(lead):]:
            assert p.annotation is not p.empty, (name, p.name)
        uses = dict(_table.FUNCS[(op, pass_)][0])
        for p in params[len(lead):-3]:  # the function's own arguments: Optional exactly when None is allowed
            assert ("Optional" in p.annotation) == (uses[p.name] != _table.REQ), (name, p.name, p.annotation)
        assert sig.return_annotation is not sig.empty and op in fn.__doc__ and pass_ in fn.__doc__


def test_annotated_public_api():
    for fn in (segops.Client.__init__, segops.Client.call, segops.Client.info, segops.Client.health,
               segops.Client.ready, segops.Client.empty, segops.Client.close, segops.call, segops.info,
               segops.default_client, segops.set_default_client):
        sig = inspect.signature(fn)
        assert sig.return_annotation is not sig.empty, fn
        assert all(p.annotation is not p.empty for p in sig.parameters.values() if p.name != "self"), fn


def test_py_typed_ships_with_the_package():
    assert os.path.exists(os.path.join(os.path.dirname(segops.__file__), "py.typed"))


def test_generated_source_is_current():
    p = subprocess.run([sys.executable, GEN, "--check"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


def test_keyword_and_positional_calls_agree(client):
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((8, 3)), rng.standard_normal((8, 3))
    idx = np.array([0, 0, 1, 1, 1, 2, 2, 3], np.int32)
    g = rng.standard_normal(4)
    a = client.segmented_dot_backward(g, x, y, idx, 4)
    b = client.segmented_dot_backward(num_segments=4, idx=idx, y=y, x=x, g_out=g)
    c = client.segmented_dot_backward(g, x, y, idx, 4, outputs=["grad_y"])
    assert isinstance(a, tuple) and len(a) == 2 and isinstance(c, np.ndarray)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[1], c)
    with pytest.raises(TypeError):
        client.segmented_dot_backward(g, x, y, idx)  # num_segments missing: Python says so itself
