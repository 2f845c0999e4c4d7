"""conftest.py: fixtures that start the REAL segopsd (built elsewhere; its path arrives in
$SEGOPSD, the fault-injection build in $SEGOPSD_TEST) on port 0, and kill it at the end."""
import os
import re
import select
import signal
import subprocess
import tempfile
import time

import pytest

LISTEN_RE = re.compile(r"^segopsd listening on (http://(\S+):(\d+))$")


def _binary(var):
    path = os.environ.get(var)
    if not path or not os.path.exists(path):
        pytest.skip(f"${var} does not name a built segopsd")
    return path


class Daemon:
    """One segopsd process. url/host/port come from the line it prints once it accepts."""

    def __init__(self, binary, args=(), env=None, expect_start=True):
        full_env = dict(os.environ)
        for k in list(full_env):
            if k.startswith("SEGOPS_") and k not in ("SEGOPS_PYTHON",):
                del full_env[k]  # the tests say exactly what they configure
        full_env.update(env or {})
        self.argv = [binary, "--listen", "127.0.0.1:0", "--log-level", "warn", *args]
        # stderr goes to a file: a pipe nobody reads could fill up and block the daemon's logging.
        self.errfile = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=self.errfile, env=full_env)
        self.url = None
        if expect_start:
            line = self._read_line(15.0)
            m = LISTEN_RE.match(line.strip())
            if not m:
                err = self.stderr_text() if self.proc.poll() is not None else ""
                self.kill()
                raise AssertionError(f"segopsd did not print its address: {line!r} {err}")
            self.url, self.host, self.port = m.group(1), m.group(2), int(m.group(3))

    def _read_line(self, timeout):
        deadline = time.time() + timeout
        buf = b""
        fd = self.proc.stdout.fileno()
        while time.time() < deadline and not buf.endswith(b"\n"):
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                chunk = os.read(fd, 1)
                if not chunk:
                    break
                buf += chunk
        return buf.decode(errors="replace")

    def terminate(self, timeout=30.0, sig=signal.SIGTERM):
        """Sends sig and waits; returns the exit status."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("segopsd did not exit after the signal")

    def stderr_text(self):
        self.errfile.seek(0)
        return self.errfile.read().decode(errors="replace")

    def stop_and_check(self):
        """Graceful stop at the end of a test: SIGTERM must give exit 0 and no sanitizer report
        (so a leak or memory error anywhere in the test fails it under an ASan build)."""
        if self.proc.poll() is None and self.url:
            rc = self.terminate()
            err = self.stderr_text()
            self.kill()
            assert rc == 0, f"segopsd exited {rc} after SIGTERM: {err[-3000:]}"
            for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
                assert marker not in err, err[-3000:]
        self.kill()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


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
