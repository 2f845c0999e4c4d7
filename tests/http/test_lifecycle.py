"""test_lifecycle.py: keep-alive, many concurrent clients, SIGTERM with requests in flight,
--help/--version, /metrics after traffic, /v1/info's op table, health endpoints."""
import json
import os
import re
import subprocess
import threading
import time

import numpy as np

from client import JSON, MSGPACK, call, conn_for, info, request
from reference import random_case, reference
from segref import OPTABLE

GOOD = b'{"x":[1,2,3,4,5,6],"idx":[0,0,1,1,1,2],"num_segments":3}'
SUM = "/v1/segmented_sum/forward"

# The op table /v1/info must serve: proto/optable.json (generated from core/ops.c, checked against it
# by CTest optable_generated_files): inputs (name, optional) and outputs, per function.
API_TABLE = {(fn["op"], fn["pass"]): ([(i["name"], i["use"] != "required") for i in fn["inputs"]],
                                      [o["name"] for o in fn["outputs"]]) for fn in OPTABLE["functions"]}


def test_info_op_table_and_limits(daemon_factory):
    d = daemon_factory("--max-body-bytes", "12345", "--max-elements", "999", "--max-connections", "77",
                       "--idle-timeout", "9", "--request-timeout", "8")
    inf = info(d.url)
    assert inf["version"] and inf["backend"] in ("cpu", "cuda") and inf["api"] == "v1"
    assert inf["devices"] and all("name" in x and "memory_total" in x for x in inf["devices"])
    lim = inf["limits"]
    assert lim["max_body_bytes"] == 12345 and lim["max_elements"] == 999 and lim["max_connections"] == 77
    assert lim["idle_timeout_s"] == 9 and lim["request_timeout_s"] == 8 and lim["max_segments"] == 999
    got = {}
    for op, passes in inf["ops"].items():
        for pas, fn in passes.items():
            ins = [(i["name"], i["optional"]) for i in fn["inputs"]]
            assert ins[-2:] == [("idx", False), ("num_segments", False)]
            got[(op, pas)] = (ins[:-2], [o["name"] for o in fn["outputs"]])
    assert got == API_TABLE
    # No paths or memory contents leak (the listeners are the addresses the client already uses; the
    # native channel's socket is told to same-host peers, as this one is, and only to them).
    assert inf["listeners"] == [d.url]
    assert set(inf["native"]) == {"socket", "version", "uid", "pid", "pid_ns"}
    assert inf["native"]["uid"] == os.geteuid()
    assert "/" not in json.dumps({k: v for k, v in inf.items() if k not in ("ops", "encodings", "listeners", "native")})


def test_health_endpoints(shared_daemon):
    st, hd, data = request(shared_daemon.url, "GET", "/healthz")
    assert st == 200 and json.loads(data) == {"status": "ok"}
    st, _, data = request(shared_daemon.url, "GET", "/readyz")
    assert st == 200


def test_keep_alive_many_requests_one_connection(shared_daemon):
    c = conn_for(shared_daemon.url)
    c.connect()
    sock = c.sock
    rng = np.random.default_rng(1)
    for i in range(30):
        enc = MSGPACK if i % 2 else JSON
        x = rng.standard_normal(10)
        idx = np.sort(rng.integers(0, 4, 10)).astype(np.int32)
        st, _, got = call(shared_daemon.url, "segmented_sum", "forward", {"x": x}, idx, 4, enc=enc, conn=c)
        assert st == 200
        np.testing.assert_allclose(got["out"], reference("segmented_sum", "forward", {"x": x}, idx, 4)["out"],
                                   rtol=1e-12, atol=1e-12)
        if i % 10 == 0:  # an error answer keeps the connection too
            st, _, _ = request(shared_daemon.url, "GET", "/nope", conn=c)
            assert st == 404
    assert c.sock is sock, "the connection was not kept alive"
    c.close()


def test_64_concurrent_clients(shared_daemon):
    table = info(shared_daemon.url)["ops"]
    errors = []
    fns = [(op, pas) for op in table for pas in table[op]]

    def client(k):
        rng = np.random.default_rng(1000 + k)
        c = conn_for(shared_daemon.url)
        try:
            for j in range(6):
                op, pas = fns[(k + j) % len(fns)]
                fn = table[op][pas]
                args, idx, S = random_case(rng, fn, 3, N=int(rng.integers(1, 200)), S=int(rng.integers(2, 20)))
                st, _, got = call(shared_daemon.url, op, pas, args, idx, S, enc=MSGPACK if j % 2 else JSON, conn=c)
                if st != 200:
                    errors.append((op, pas, st, got))
                    continue
                ref = reference(op, pas, args, idx, S)
                for name, r in ref.items():
                    e = np.abs(got[name] - r) / np.maximum(np.abs(r), 1)
                    if e.max(initial=0) > 1e-12:
                        errors.append((op, pas, name, e.max()))
        except Exception as ex:  # noqa: BLE001 - report every failure of every client
            errors.append(repr(ex))
        finally:
            c.close()

    ts = [threading.Thread(target=client, args=(k,)) for k in range(64)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:5]


def test_sigterm_with_requests_in_flight(daemon_factory):
    # Unbatched, so the ten requests take five rounds of two workers: still running at the signal.
    d = daemon_factory("--max-batch-elements", "0", env={"SEGOPS_TEST_DELAY_MS": "150"}, test_build=True)
    idle = conn_for(d.url)
    assert request(d.url, "GET", "/healthz", conn=idle)[0] == 200  # a kept-alive connection
    res = [None] * 10

    def one(i):
        res[i] = request(d.url, "POST", SUM, GOOD, {"Content-Type": JSON})

    ts = [threading.Thread(target=one, args=(i,)) for i in range(10)]
    for t in ts:
        t.start()
    time.sleep(0.3)  # all ten sent, most still queued behind the slow backend
    d.proc.send_signal(15)
    time.sleep(0.1)
    # Draining: readyz says 503 to a client that still holds a connection.
    st, hd, _ = request(d.url, "GET", "/readyz", conn=idle)
    assert st == 503 and hd["retry-after"]
    for t in ts:
        t.join(30)
    assert d.proc.wait(timeout=30) == 0
    codes = [r[0] for r in res]
    assert codes == [200] * 10, codes
    for r in res:
        assert json.loads(r[2])["out"]["data"] == [3.0, 12.0, 6.0]


def test_sigint_idle_exits_zero(daemon_factory):
    d = daemon_factory()
    assert request(d.url, "GET", "/healthz")[0] == 200
    assert d.terminate(sig=2) == 0


def test_help_and_version(segopsd_path):
    out = subprocess.run([segopsd_path, "--help"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0
    for flag, env in [("--listen", "SEGOPS_LISTEN"), ("--backend", "SEGOPS_BACKEND"), ("--devices", "SEGOPS_DEVICES"),
                      ("--threads", "SEGOPS_THREADS"), ("--token-file", "SEGOPS_TOKEN_FILE"),
                      ("--max-body-bytes", "SEGOPS_MAX_BODY_BYTES"), ("--max-elements", "SEGOPS_MAX_ELEMENTS"),
                      ("--max-connections", "SEGOPS_MAX_CONNECTIONS"), ("--idle-timeout", "SEGOPS_IDLE_TIMEOUT"),
                      ("--request-timeout", "SEGOPS_REQUEST_TIMEOUT"), ("--log-level", "SEGOPS_LOG_LEVEL"),
                      ("--max-batch-elements", "SEGOPS_MAX_BATCH_ELEMENTS"),
                      ("--max-queue-delay-us", "SEGOPS_MAX_QUEUE_DELAY_US")]:
        assert flag in out.stdout and env in out.stdout, flag
    assert "SEGOPS_TOKEN]" in out.stdout and "127.0.0.1:8080" in out.stdout
    v = subprocess.run([segopsd_path, "--version"], capture_output=True, text=True, timeout=10)
    assert v.returncode == 0 and re.match(r"segopsd \d+\.\d+", v.stdout)
    bad = subprocess.run([segopsd_path, "--max-body-bytes", "lots"], capture_output=True, text=True, timeout=10)
    assert bad.returncode != 0 and "max-body-bytes" in bad.stderr


def test_environment_configures(daemon_factory):
    d = daemon_factory(env={"SEGOPS_MAX_BODY_BYTES": "4k", "SEGOPS_IDLE_TIMEOUT": "7"})
    lim = info(d.url)["limits"]
    assert lim["max_body_bytes"] == 4096 and lim["idle_timeout_s"] == 7
    d2 = daemon_factory("--max-body-bytes", "8k", env={"SEGOPS_MAX_BODY_BYTES": "4k"})  # the flag wins
    assert info(d2.url)["limits"]["max_body_bytes"] == 8192


def metric(text, name, **labels):
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:]+)(\{[^}]*\})? (\S+)$", line)
        assert m, f"bad exposition line: {line!r}"
        if m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == str(v) for k, v in labels.items()):
            return float(m.group(3))
    return None


def test_metrics_after_traffic(daemon_factory):
    d = daemon_factory()
    # Requests are counted when libmicrohttpd reports them complete, which on one keep-alive
    # connection happens before the next request is read; on separate connections the scrape
    # could overtake the previous connection's completion (seen once under ASan).
    c = conn_for(d.url, 60)
    for _ in range(5):
        assert request(d.url, "POST", SUM, GOOD, {"Content-Type": JSON}, conn=c)[0] == 200
    for _ in range(2):
        assert request(d.url, "POST", SUM, b"{", {"Content-Type": JSON}, conn=c)[0] == 400
    st, hd, data = request(d.url, "GET", "/metrics", conn=c)
    c.close()
    assert st == 200 and hd["content-type"].startswith("text/plain; version=0.0.4")
    t = data.decode()
    assert metric(t, "segops_requests_total", op="segmented_sum", status=200) == 5
    assert metric(t, "segops_requests_total", op="segmented_sum", status=400) == 2
    assert metric(t, "segops_requests_total", op="segmented_dot", status=200) == 0
    fn = {"op": "segmented_sum", "pass": "forward"}
    for h in ("queue", "compute", "request"):
        assert metric(t, f"segops_{h}_duration_seconds_count", **fn) >= 5, h
        assert metric(t, f"segops_{h}_duration_seconds_bucket", le="+Inf", **fn) == metric(
            t, f"segops_{h}_duration_seconds_count", **fn)
    # Op requests only (the 400s too): no probe or scrape in the op latency.
    assert metric(t, "segops_request_duration_seconds_count", **fn) == 7
    assert metric(t, "segops_request_size_bytes_sum") == 5 * len(GOOD) + 2
    assert metric(t, "segops_request_size_bytes_count") == 7
    assert metric(t, "segops_response_size_bytes_sum") > 5 * 60
    assert metric(t, "segops_in_flight_requests") == 1  # this scrape itself
    assert metric(t, "segops_queued_requests") == 0 and metric(t, "segops_executing_requests") == 0
    assert metric(t, "segops_batch_size_count") == 5
    assert metric(t, "segops_rejected_requests_total", reason="resource_exhausted") == 0
    backend = info(d.url)["backend"]  # cpu here, cuda on a GPU machine
    assert metric(t, "segops_build_info", backend=backend) == 1
    assert metric(t, "segops_device_busy_seconds_total", device=0) > 0
    assert "# TYPE segops_request_duration_seconds histogram" in t
    for old in ("segops_total_seconds", "segops_queue_depth", "segops_bytes_received_total",
                "segops_backend_busy_seconds_total"):
        assert old not in t, old  # renamed (CHANGELOG.md)
