"""conftest.py: fixtures that start the REAL segopsd (built elsewhere; its path arrives in
$SEGOPSD, the fault-injection build in $SEGOPSD_TEST) on port 0, and kill it at the end."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/: shared modules
from segopsd_proc import Daemon  # noqa: E402


def _binary(var):
    path = os.environ.get(var)
    if not path or not os.path.exists(path):
        pytest.skip(f"${var} does not name a built segopsd")
    return path


@pytest.fixture(scope="session")
def segopsd_path():
    return _binary("SEGOPSD")


@pytest.fixture(scope="session")
def segopsd_test_path():
    return _binary("SEGOPSD_TEST")


@pytest.fixture
def daemon_factory():
    """daemon_factory(*args, env=None, test_build=False) -> Daemon; every daemon is killed at the end."""
    made = []

    def make(*args, env=None, test_build=False, expect_start=True):
        var = "SEGOPSD_TEST" if test_build else "SEGOPSD"
        d = Daemon(_binary(var), args, env, expect_start)
        made.append(d)
        return d

    yield make
    for d in made:
        d.stop_and_check()


@pytest.fixture(scope="module")
def shared_daemon():
    """One plain daemon for the read-only tests of a module."""
    d = Daemon(_binary("SEGOPSD"), ())
    yield d
    d.stop_and_check()


@pytest.fixture(scope="module")
def tc(shared_daemon):
    """A tritonclient[http] client of shared_daemon (the Open Inference Protocol tests)."""
    import tritonclient.http as th  # only those tests need it; they SKIP (77) without it

    c = th.InferenceServerClient(f"{shared_daemon.host}:{shared_daemon.port}", network_timeout=60)
    yield c
    c.close()


@pytest.fixture(scope="module")
def table(shared_daemon):
    """shared_daemon's op table (/v1/info's "ops")."""
    from client import info

    return info(shared_daemon.url)["ops"]
