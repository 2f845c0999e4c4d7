"""conftest.py: pytest fixtures that start the real segopsd on port 0 and stop it with SIGTERM.

The daemon binary comes from --segopsd PATH or $SEGOPSD (CTest passes it). With
$SEGOPS_TEST_URL set, the tests talk to that running server instead and skip the ones that
need a daemon started with special options."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
_SRC = os.path.join(HERE, "..", "..", "clients", "python", "src")
if os.path.isdir(_SRC) and os.path.abspath(_SRC) not in map(os.path.abspath, sys.path):
    sys.path.insert(0, os.path.abspath(_SRC))  # test the tree, installed or not
sys.path.insert(0, os.path.join(HERE, ".."))  # tests/: the shared reference and daemon runner

import segops  # noqa: E402
from segopsd_proc import Daemon  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--segopsd", default=os.environ.get("SEGOPSD"), help="path of the segopsd binary")


@pytest.fixture(scope="session")
def segopsd_path(request):
    path = request.config.getoption("--segopsd")
    if not path:
        pytest.skip("no segopsd: pass --segopsd PATH or set SEGOPSD (CTest does)")
    if not os.access(path, os.X_OK):
        pytest.fail(f"segopsd {path!r} is not an executable file")
    return path


@pytest.fixture(scope="session")
def start_daemon(segopsd_path):
    """Factory: start_daemon(args=(), env=None) -> Daemon, stopped at the end of the session."""
    started = []

    def start(args=(), env=None):
        d = Daemon(segopsd_path, args, env)
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()  # the tests that start one assert its exit status themselves
        d.kill()


@pytest.fixture(scope="session")
def server_url(request):
    url = os.environ.get("SEGOPS_TEST_URL")
    if url:
        yield url
        return
    d = request.getfixturevalue("start_daemon")()
    yield d.url
    d.stop_and_check()


@pytest.fixture(scope="session")
def own_daemons():
    """Tests that start a daemon with special options skip when pointed at an external server."""
    if os.environ.get("SEGOPS_TEST_URL"):
        pytest.skip("SEGOPS_TEST_URL is set: not starting daemons")


@pytest.fixture(scope="session")
def client(server_url):
    c = segops.Client(server_url, timeout=60.0)
    yield c
    c.close()
