"""conftest.py: pytest fixtures that start the real segopsd on port 0 and stop it with SIGTERM.

The daemon binary comes from --segopsd PATH or $SEGOPSD (CTest passes it). With
$SEGOPS_TEST_URL set, the tests talk to that running server instead and skip the ones that
need a daemon started with special options."""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
_SRC = os.path.join(HERE, "..", "..", "clients", "python", "src")
if os.path.isdir(_SRC) and os.path.abspath(_SRC) not in map(os.path.abspath, sys.path):
    sys.path.insert(0, os.path.abspath(_SRC))  # test the tree, installed or not

import segops  # noqa: E402

_LISTEN_RE = re.compile(rb"segopsd listening on (http://\S+)")


def pytest_addoption(parser):
    parser.addoption("--segopsd", default=os.environ.get("SEGOPSD"), help="path of the segopsd binary")


class Daemon:
    """A segopsd process started on 127.0.0.1:0; url is parsed from its listening line."""

    def __init__(self, path, args=(), env=None, start_timeout=30.0):
        full_env = dict(os.environ)
        full_env.pop("SEGOPS_TOKEN", None)
        full_env.pop("SEGOPS_LISTEN", None)
        if env:
            full_env.update(env)
        self.cmd = [path, "--listen", "127.0.0.1:0", *args]
        self.proc = subprocess.Popen(
            self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, start_new_session=True
        )
        self.url = None
        self._stderr = []
        self._err_thread = threading.Thread(target=self._drain, args=(self.proc.stderr, self._stderr), daemon=True)
        self._err_thread.start()
        found = threading.Event()

        def read_stdout():
            for line in self.proc.stdout:
                m = _LISTEN_RE.search(line)
                if m and not found.is_set():
                    self.url = m.group(1).decode()
                    found.set()
            found.set()

        self._out_thread = threading.Thread(target=read_stdout, daemon=True)
        self._out_thread.start()
        if not found.wait(start_timeout) or self.url is None:
            self.stop()
            raise RuntimeError(f"segopsd did not print its listening line: {self.cmd}\n{self.stderr()}")

    @staticmethod
    def _drain(stream, sink):
        for line in stream:
            sink.append(line.decode("utf-8", "replace"))
            del sink[:-200]

    def stderr(self):
        return "".join(self._stderr)

    def stop(self, timeout=20.0):
        """SIGTERM, then wait; returns the exit status (SPEC §7: 0 after a clean drain)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


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
        d.stop()


@pytest.fixture(scope="session")
def server_url(request):
    url = os.environ.get("SEGOPS_TEST_URL")
    if url:
        yield url
        return
    d = request.getfixturevalue("start_daemon")()
    yield d.url
    rc = d.stop()
    assert rc == 0, f"segopsd exited with {rc} after SIGTERM\n{d.stderr()}"


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
