"""test_drain.py: the rolling-update drain (README.md, Configuration; segopsd --help) and the listen-address safety rule, on the real
segopsd: SIGTERM turns /readyz 503 at once while work is still served for --drain-seconds, then new
work gets 503 and in-flight work finishes within --shutdown-timeout; a non-loopback address needs a
token or --allow-unauthenticated."""
import json
import subprocess
import threading
import time

from client import JSON, conn_for, info, request
from segopsd_proc import Daemon

GOOD = b'{"x":[1,2,3,4,5,6],"idx":[0,0,1,1,1,2],"num_segments":3}'
SUM = "/v1/segmented_sum/forward"


def post(url, conn=None):
    return request(url, "POST", SUM, GOOD, {"Content-Type": JSON}, conn=conn)


def test_drain_serves_then_refuses_then_exits(daemon_factory):
    d = daemon_factory("--drain-seconds", "1.5", "--shutdown-timeout", "10")
    lim = info(d.url)["limits"]
    assert lim["drain_seconds"] == 1.5 and lim["shutdown_timeout_s"] == 10
    kept = conn_for(d.url)
    assert post(d.url, conn=kept)[0] == 200
    t0 = time.monotonic()
    d.proc.send_signal(15)
    time.sleep(0.2)
    st, hd, body = request(d.url, "GET", "/readyz")
    assert st == 503 and json.loads(body)["error"]["message"] == "draining" and hd["retry-after"]
    # Still served during the drain period, on a kept-alive connection and on new ones.
    st, hd, body = post(d.url, conn=kept)
    assert st == 200 and json.loads(body)["out"]["data"] == [3.0, 12.0, 6.0]
    assert hd.get("connection") == "close"  # keep-alive clients reconnect, elsewhere
    assert post(d.url)[0] == 200
    assert request(d.url, "GET", "/healthz")[0] == 200  # alive: liveness must not kill a draining pod
    assert d.proc.poll() is None
    # After the drain period new work is refused (503 + Retry-After, or the socket is gone).
    time.sleep(max(0.0, 1.5 - (time.monotonic() - t0)) + 0.3)
    try:
        st, hd, _ = post(d.url)
        assert st == 503 and hd["retry-after"], st
    except (ConnectionError, OSError):
        pass
    assert d.proc.wait(timeout=10) == 0
    assert 1.5 <= time.monotonic() - t0 < 10


def test_in_flight_work_finishes_after_drain(daemon_factory):
    # Work accepted before the refusal point completes; the exit follows it.
    d = daemon_factory("--drain-seconds", "0.5", "--shutdown-timeout", "20", "--max-batch-elements", "0",
                       env={"SEGOPS_TEST_DELAY_MS": "400"}, test_build=True)
    res = [None] * 6

    def one(i):
        res[i] = post(d.url)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    time.sleep(0.2)
    d.proc.send_signal(15)
    for t in ts:
        t.join(30)
    assert d.proc.wait(timeout=20) == 0
    assert [r[0] for r in res] == [200] * 6


def test_shutdown_timeout_bounds_the_exit(daemon_factory):
    # A backend call that outlives --shutdown-timeout: the daemon leaves at the timeout, exit 1.
    d = daemon_factory("--shutdown-timeout", "1", env={"SEGOPS_TEST_DELAY_MS": "8000"}, test_build=True)
    t = threading.Thread(target=lambda: _ignore(post, d.url), daemon=True)
    t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    d.proc.send_signal(15)
    assert d.proc.wait(timeout=6) == 1
    assert time.monotonic() - t0 < 4
    assert "shutdown timeout" in d.stderr_text()
    d.url = None  # already stopped: nothing for the fixture to check


def _ignore(fn, *a):
    try:
        fn(*a)
    except OSError:
        pass


def test_options_in_help_and_environment(segopsd_path, daemon_factory):
    out = subprocess.run([segopsd_path, "--help"], capture_output=True, text=True, timeout=10).stdout
    for flag, env in [("--drain-seconds", "SEGOPS_DRAIN_SECONDS"), ("--shutdown-timeout", "SEGOPS_SHUTDOWN_TIMEOUT"),
                      ("--allow-unauthenticated", "SEGOPS_ALLOW_UNAUTHENTICATED")]:
        assert flag in out and env in out, flag
    d = daemon_factory(env={"SEGOPS_DRAIN_SECONDS": "0.25", "SEGOPS_SHUTDOWN_TIMEOUT": "7"})
    lim = info(d.url)["limits"]
    assert lim["drain_seconds"] == 0.25 and lim["shutdown_timeout_s"] == 7
    bad = subprocess.run([segopsd_path, "--drain-seconds", "-1"], capture_output=True, text=True, timeout=10)
    assert bad.returncode == 2 and "--drain-seconds" in bad.stderr


def test_non_loopback_needs_a_token(segopsd_path, tmp_path):
    r = subprocess.run([segopsd_path, "--listen", "0.0.0.0:0"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "without a token" in r.stderr and "--allow-unauthenticated" in r.stderr and "--token-file" in r.stderr
    # Every listener counts: a loopback one first does not let a public one through.
    r = subprocess.run([segopsd_path, "--listen", "127.0.0.1:0", "--listen", "[::]:0"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 2 and "without a token" in r.stderr
    tok = tmp_path / "token"
    tok.write_text("s3cret-token\n")
    made = []
    try:
        # Loopback addresses other than 127.0.0.1 are still local.
        made.append(Daemon(segopsd_path, listen="127.0.0.2:0"))
        assert made[-1].host == "127.0.0.2" and request(made[-1].url, "GET", "/healthz")[0] == 200
        # With --allow-unauthenticated (flag or environment), or a token from a file, it starts.
        for args, env in [(["--allow-unauthenticated"], None), ([], {"SEGOPS_ALLOW_UNAUTHENTICATED": "1"}),
                          (["--token-file", str(tok)], None)]:
            made.append(Daemon(segopsd_path, args, env, listen="0.0.0.0:0"))
            url = f"http://127.0.0.1:{made[-1].port}"
            assert request(url, "GET", "/readyz")[0] == 200
        assert request(url, "GET", "/v1/info")[0] == 401
        assert request(url, "GET", "/v1/info", headers={"Authorization": "Bearer s3cret-token"})[0] == 200
    finally:
        for d in made:
            d.stop_and_check()


def _metric(url, series):
    text = request(url, "GET", "/metrics", headers={"Authorization": "Bearer rejected-test"})[2].decode()
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[1])
    raise AssertionError(f"{series} not in /metrics")


def test_rejections_counted_by_reason(daemon_factory, tmp_path):
    tok = tmp_path / "token"
    tok.write_text("rejected-test")
    d = daemon_factory("--token-file", str(tok), "--max-body-bytes", "1k", "--drain-seconds", "0.2",
                       "--shutdown-timeout", "5")
    auth = {"Authorization": "Bearer rejected-test", "Content-Type": JSON}
    assert request(d.url, "POST", SUM, GOOD, {"Content-Type": JSON})[0] == 401
    assert request(d.url, "POST", SUM, b"[" + b"1," * 600 + b"1]", auth)[0] == 413
    assert request(d.url, "GET", "/readyz")[0] == 200  # probes are never rejections
    assert _metric(d.url, 'segops_rejected_requests_total{reason="unauthenticated"}') == 1
    assert _metric(d.url, 'segops_rejected_requests_total{reason="too_large"}') == 1
    assert _metric(d.url, 'segops_rejected_requests_total{reason="unavailable"}') == 0
    d.proc.send_signal(15)
    time.sleep(0.5)  # past the drain period: op requests are refused now
    try:
        assert request(d.url, "POST", SUM, GOOD, auth)[0] == 503
        assert _metric(d.url, 'segops_rejected_requests_total{reason="unavailable"}') >= 1
    except (ConnectionError, OSError):
        pass  # already gone: the exit below is what matters then
    assert d.proc.wait(timeout=10) == 0
