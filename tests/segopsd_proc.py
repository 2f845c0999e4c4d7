"""segopsd_proc.py: the tests' one way to run the real segopsd: on 127.0.0.1:0, its address read
from the line it prints once it accepts, stderr kept in a file, stopped with SIGTERM (exit 0 and
no sanitizer report expected). Shared by tests/http, tests/python, tests/hardening (their
conftests put tests/ on sys.path)."""
import atexit
import http.client
import os
import re
import select
import signal
import socket
import subprocess
import tempfile
import time

LISTEN_RE = re.compile(r"^segopsd listening on (http://(\S+):(\d+))$")
SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:")

# Daemons still running when the interpreter exits (a script or test that never stopped its
# Daemon, or a crash between start and stop) are killed then, not left behind.
_RUNNING = set()


@atexit.register
def _kill_leftovers():
    for proc in list(_RUNNING):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _RUNNING.clear()


class Daemon:
    """One segopsd process. url/host/port come from the line it prints once it accepts.

    listen is the first --listen address (more --listen in args add listeners); args go after
    --listen/--log-level; env is added to an environment without SEGOPS_* variables
    (the tests say exactly what they configure); wrapper runs it under e.g. valgrind."""

    def __init__(self, binary, args=(), env=None, expect_start=True, wrapper=(), start_timeout=30.0,
                 listen="127.0.0.1:0"):
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("SEGOPS_") or k == "SEGOPS_PYTHON"}
        full_env.update(env or {})
        self.argv = [*wrapper, binary, "--listen", listen, "--log-level", "warn", *args]
        # stderr goes to a file: a pipe nobody reads could fill up and block the daemon's logging.
        self.errfile = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=self.errfile, env=full_env)
        _RUNNING.add(self.proc)
        self.url = self.host = self.port = None
        if expect_start:
            line = self._read_line(start_timeout)
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

    def conn(self, timeout=10):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def sock(self):
        return socket.create_connection((self.host, self.port), timeout=10)

    def terminate(self, timeout=30.0, sig=signal.SIGTERM):
        """Sends sig and waits; returns the exit status."""
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
            _RUNNING.discard(self.proc)
            return rc
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("segopsd did not exit after the signal")

    def stop(self, timeout=30.0):
        """SIGTERM if still running; returns the exit status (exit 0 after a clean drain)."""
        if self.proc.poll() is None:
            return self.terminate(timeout)
        return self.proc.returncode

    def stderr_text(self):
        self.errfile.seek(0)
        return self.errfile.read().decode(errors="replace")

    def stop_and_check(self, timeout=30.0):
        """Graceful stop at the end of a test: SIGTERM must give exit 0 and no sanitizer report
        (so a leak or memory error anywhere in the test fails it under an ASan build)."""
        if self.proc.poll() is None and self.url:
            rc = self.terminate(timeout)
            err = self.stderr_text()
            self.kill()
            assert rc == 0, f"segopsd exited {rc} after SIGTERM: {err[-3000:]}"
            for marker in SANITIZER_MARKERS:
                assert marker not in err, err[-3000:]
        self.kill()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        _RUNNING.discard(self.proc)
        if self.proc.stdout:
            self.proc.stdout.close()
