"""conftest.py: fixtures of the hostile-client tests: the real segopsd on port 0 ($SEGOPSD; the
fault-injection build in $SEGOPSD_TEST), stopped with SIGTERM and checked (exit 0, no sanitizer
report) at the end, and raw-socket helpers for the bytes an HTTP library will not send."""
import json
import os
import socket
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/: shared modules
from segopsd_proc import Daemon  # noqa: E402

from hostile import GOOD, OP, read_until_close  # noqa: E402,F401  (GOOD, OP: used by the tests)


def _binary(var):
    path = os.environ.get(var)
    if not path or not os.path.exists(path):
        pytest.skip(f"${var} does not name a built segopsd")
    return path


@pytest.fixture
def daemon():
    """daemon(*args, env=None, test_build=False) -> Daemon, stopped and checked at the end."""
    made = []

    def make(*args, env=None, test_build=False, expect_start=True):
        d = Daemon(_binary("SEGOPSD_TEST" if test_build else "SEGOPSD"), args, env, expect_start, start_timeout=60)
        made.append(d)
        return d

    yield make
    for d in made:
        d.stop_and_check()


def head(cl=None, extra=b"", path=OP, ctype=b"application/json"):
    """A POST head; cl=None leaves Content-Length out."""
    h = b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: " + ctype + b"\r\n"
    if cl is not None:
        h += b"Content-Length: %d\r\n" % cl
    return h + extra + b"\r\n"


def read_all(s, timeout=5.0):
    """Everything the server sends until it closes or stays silent for `timeout`."""
    return read_until_close(s, timeout)[0]


def raw(d, data, timeout=5.0, shut=False):
    s = d.sock()
    s.sendall(data)
    if shut:
        s.shutdown(socket.SHUT_WR)
    out = read_all(s, timeout)
    s.close()
    return out


def parse_response(data):
    """(status, headers (lower-case names), body) of the first response in data; asserts it is
    well formed: one status line, a Content-Length matching the body that follows."""
    assert data.startswith(b"HTTP/1.1 "), data[:200]
    hend = data.index(b"\r\n\r\n")
    lines = data[:hend].split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, v = line.split(b":", 1)
        headers[k.strip().lower().decode()] = v.strip().decode()
    n = int(headers.get("content-length", "0"))
    body = data[hend + 4:hend + 4 + n]
    assert len(body) == n, (n, data[:300])
    return status, headers, body, data[hend + 4 + n:]


def json_error(data, status):
    """The response in data is `status` with a JSON error body; returns (code, message)."""
    st, hdr, body, rest = parse_response(data)
    assert st == status, data[:400]
    assert hdr.get("content-type") == "application/json", hdr
    err = json.loads(body)["error"]
    assert isinstance(err["code"], str) and isinstance(err["message"], str)
    return err["code"], err["message"], hdr, rest


def serving(d, timeout=10):
    """The daemon answers a good request and /healthz."""
    c = d.conn(timeout=timeout)
    c.request("POST", OP.decode(), GOOD, {"Content-Type": "application/json"})
    r = c.getresponse()
    body = r.read()
    c.close()
    assert r.status == 200, (r.status, body)
    c = d.conn(timeout=timeout)
    c.request("GET", "/healthz")
    r = c.getresponse()
    r.read()
    c.close()
    return r.status == 200


def wait_until(pred, timeout, step=0.05):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()
