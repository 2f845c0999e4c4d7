"""test_unix.py: the unix-domain-socket listener (--listen unix:/path, --socket-mode, several
listeners at once, stale socket files, removal on exit) against the real segopsd, driven by curl
--unix-socket and by Python's http.client over AF_UNIX."""
import http.client
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile

import numpy as np
import pytest

from client import MSGPACK, decode, encode


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def unix_request(path, method, url, body=None, headers=None):
    c = UnixHTTPConnection(path)
    try:
        c.request(method, url, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


@pytest.fixture
def sockdir():
    d = tempfile.mkdtemp(prefix="segops-unix-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def start_with_unix(daemon_factory, path, *args, **kw):
    """A daemon on 127.0.0.1:0 and unix:path; returns (daemon, its second 'listening on' line)."""
    d = daemon_factory("--backend", "cpu", "--listen", f"unix:{path}", *args, **kw)
    return d, d._read_line(10).strip()


def test_tcp_and_unix_at_once(daemon_factory, sockdir):
    path = os.path.join(sockdir, "segops.sock")
    d, line = start_with_unix(daemon_factory, path)
    assert line == f"segopsd listening on unix:{path}"
    st = os.lstat(path)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o660  # the default --socket-mode
    code, _, body = unix_request(path, "GET", "/v1/info")
    assert code == 200
    assert json.loads(body)["listeners"] == [d.url, f"unix:{path}"]
    # The same op over both transports: the same bits.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1000, 3)).astype(np.float32)
    idx = np.sort(rng.integers(0, 40, 1000)).astype(np.int32)
    req = encode({"x": x}, idx, 40, MSGPACK, dtype="float32")
    h = {"Content-Type": MSGPACK}
    code_u, hd_u, body_u = unix_request(path, "POST", "/v1/segmented_sum/forward", req, h)
    c = d.conn()
    c.request("POST", "/v1/segmented_sum/forward", body=req, headers=h)
    r = c.getresponse()
    body_t = r.read()
    c.close()
    assert code_u == 200 and r.status == 200
    assert decode(body_u, hd_u["content-type"])["out"].tobytes() == decode(body_t, MSGPACK)["out"].tobytes()


def test_curl_unix_socket(daemon_factory, sockdir):
    if not shutil.which("curl"):
        pytest.skip("curl is not installed")
    path = os.path.join(sockdir, "s.sock")
    start_with_unix(daemon_factory, path)
    out = subprocess.run(
        ["curl", "-s", "--unix-socket", path, "http://localhost/v1/segmented_sum/forward", "-H",
         "Content-Type: application/json", "-d", '{"x":[1,2,3,4,5,6],"idx":[0,0,1,1,1,2],"num_segments":3}'],
        capture_output=True, timeout=30, check=True)
    assert json.loads(out.stdout) == {"out": {"dtype": "float64", "shape": [3], "data": [3.0, 12.0, 6.0]}}
    health = subprocess.run(["curl", "-s", "--unix-socket", path, "http://localhost/healthz"], capture_output=True,
                            timeout=30, check=True)
    assert json.loads(health.stdout) == {"status": "ok"}


def test_socket_mode_bits(daemon_factory, sockdir):
    path = os.path.join(sockdir, "m.sock")
    start_with_unix(daemon_factory, path, "--socket-mode", "0600")
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    path2 = os.path.join(sockdir, "m2.sock")
    start_with_unix(daemon_factory, path2, "--socket-mode", "666")
    assert stat.S_IMODE(os.lstat(path2).st_mode) == 0o666


def test_token_applies_on_unix_socket(daemon_factory, sockdir):
    path = os.path.join(sockdir, "t.sock")
    start_with_unix(daemon_factory, path, env={"SEGOPS_TOKEN": "sekrit-token"})
    assert unix_request(path, "GET", "/v1/info")[0] == 401
    assert unix_request(path, "GET", "/v1/info", headers={"Authorization": "Bearer sekrit-token"})[0] == 200
    assert unix_request(path, "GET", "/healthz")[0] == 200


def test_socket_removed_on_exit(daemon_factory, sockdir):
    path = os.path.join(sockdir, "x.sock")
    d, _ = start_with_unix(daemon_factory, path)
    assert os.path.exists(path)
    assert d.terminate() == 0
    assert not os.path.exists(path)


def test_stale_socket_replaced(daemon_factory, sockdir):
    path = os.path.join(sockdir, "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)  # a socket file nobody listens on: what a killed daemon leaves
    s.close()
    assert os.path.exists(path)
    start_with_unix(daemon_factory, path)
    assert unix_request(path, "GET", "/healthz")[0] == 200
    # After SIGKILL (no cleanup) a new daemon takes the path over.
    path2 = os.path.join(sockdir, "killed.sock")
    d, _ = start_with_unix(daemon_factory, path2)
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait()
    assert os.path.exists(path2)
    start_with_unix(daemon_factory, path2)
    assert unix_request(path2, "GET", "/healthz")[0] == 200


def test_live_socket_and_non_socket_refused(daemon_factory, sockdir):
    path = os.path.join(sockdir, "live.sock")
    start_with_unix(daemon_factory, path)
    second = daemon_factory("--backend", "cpu", "--listen", f"unix:{path}", expect_start=False)
    assert second.proc.wait(timeout=30) != 0
    assert "another process is listening" in second.stderr_text()
    assert unix_request(path, "GET", "/healthz")[0] == 200  # the first one still serves
    regular = os.path.join(sockdir, "file")
    with open(regular, "w") as f:
        f.write("keep me")
    third = daemon_factory("--backend", "cpu", "--listen", f"unix:{regular}", expect_start=False)
    assert third.proc.wait(timeout=30) != 0
    assert "not a socket" in third.stderr_text()
    assert open(regular).read() == "keep me"


def test_listen_env_unix_only(segopsd_path, sockdir):
    path = os.path.join(sockdir, "env.sock")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEGOPS_")}
    env.update({"SEGOPS_LISTEN": f"unix:{path}", "SEGOPS_BACKEND": "cpu", "SEGOPS_LOG_LEVEL": "warn"})
    p = subprocess.Popen([segopsd_path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        line = p.stdout.readline().decode().strip()
        assert line == f"segopsd listening on unix:{path}"
        code, _, body = unix_request(path, "GET", "/v1/info")
        assert code == 200 and json.loads(body)["listeners"] == [f"unix:{path}"]
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0
    assert not os.path.exists(path)


@pytest.mark.parametrize("args, word", [
    (["--listen", "unix:relative.sock"], "--listen"),
    (["--listen", "unix:/" + "a" * 200], "--listen"),
    (["--listen", "127.0.0.1:0,"], "--listen"),
    (["--socket-mode", "0999"], "--socket-mode"),
    (["--socket-mode", "rw"], "--socket-mode"),
])
def test_bad_listen_options(segopsd_path, args, word):
    p = subprocess.run([segopsd_path, *args], capture_output=True, timeout=30)
    assert p.returncode == 2 and word in p.stderr.decode()
