"""test_shm_users.py: the second hostile-client run's findings that need a second local user,
against the real daemon, the other user a process run with setpriv (root only: every test is
SKIPPED otherwise, and CTest shows SKIPPED): the daemon maps no object the requesting uid could not
read and write itself (2); regions belong to the uid that registered them (3); one peer's unread
answers hold only its share of the in-flight budget (4); one peer's idle connections leave others
their slots, and a full house still answers health checks (6); the overflow uid is no uid."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from as_user import OTHER_UID, THIRD_UID, argv_as, overflow_uid, python_for, run_as

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
from client import request  # noqa: E402
from shm_util import ShmObject, register, shm_call  # noqa: E402

GOOD = b'{"x":[1,2,3,4,5,6],"idx":[0,0,1,1,1,2],"num_segments":3}'


@pytest.fixture(scope="module")
def py():
    p = python_for(OTHER_UID)
    if p is None:
        pytest.skip("needs root and setpriv to run a client as another uid")
    return p


def good(url):
    return request(url, "POST", "/v1/segmented_sum/forward", GOOD, {"Content-Type": "application/json"}, timeout=10)


# ---- 2: the confused deputy ------------------------------------------------------------------------


def test_no_object_the_client_could_not_use_itself(daemon, py):
    d = daemon()
    mine = ShmObject(4096)  # root's, 0600
    try:
        mine.write(0, np.array([7.0, 8.0, 9.0]).tobytes())
        out = run_as(OTHER_UID, py, r"""
url, victim = sys.argv[1], sys.argv[2]
res = {}
res["victim"] = req(url, "POST", "/v2/systemsharedmemory/region/steal/register",
                    {"key": victim, "byte_size": 4096})
key, m = shm_object(4096, 0o600, "own")
m[0:24] = (b"\x00" * 7 + b"\x40") * 3  # 2.0, 2.0, 2.0
res["own"] = req(url, "POST", "/v2/systemsharedmemory/region/own/register", {"key": key, "byte_size": 4096})
res["use"] = req(url, "POST", "/v1/segmented_sum/forward", {
    "x": {"dtype": "float64", "shape": [3], "shm": {"region": "own", "offset": 0}},
    "idx": [0, 0, 0], "num_segments": 1}, {"Content-Type": "application/json"})
key2, m2 = shm_object(4096, 0o600, "root-may-not")
key3, m3 = shm_object(4096, 0o666, "open")
res["keys"] = [key2, key3]
print(json.dumps(res))
m.close(); m2.close(); m3.close()
""", d.url, mine.key)
        res = json.loads(out)
        st, body = res["victim"]
        assert st == 400 and "not the requesting client's to share" in body, res["victim"]
        assert res["own"][0] == 200, res["own"]
        st, body = res["use"]
        assert st == 200 and json.loads(body)["out"]["data"] == [6.0], res["use"]
        # The rule holds for root as a client too: another user's 0600 object is not root's to
        # share through the daemon; one open to everyone is.
        k600, k666 = res["keys"]
        try:
            st, body = register(d.url, "r600", k600, 4096)
            assert st == 400 and "not the requesting client's" in body["error"], body
            assert register(d.url, "r666", k666, 4096) == (200, {})
        finally:
            for k in (k600, k666, f"/segops-test-uid{OTHER_UID}-"):
                if os.path.exists("/dev/shm" + k):
                    os.unlink("/dev/shm" + k)
    finally:
        mine.close()
        for f in os.listdir("/dev/shm"):
            if f.startswith(f"segops-test-uid{OTHER_UID}-"):
                os.unlink("/dev/shm/" + f)


# ---- 3: no isolation between clients ---------------------------------------------------------------


def test_regions_belong_to_the_uid_that_registered_them(daemon, py):
    d = daemon()
    obj = ShmObject(4096)
    try:
        obj.write(0, np.array([1.0, 2.0, 3.0]).tobytes())
        assert register(d.url, "victim", obj.key, 4096) == (200, {})
        out = run_as(OTHER_UID, py, r"""
url = sys.argv[1]
res = {"status": req(url, "GET", "/v2/systemsharedmemory/status"),
       "one": req(url, "GET", "/v2/systemsharedmemory/region/victim/status"),
       "unregister": req(url, "POST", "/v2/systemsharedmemory/region/victim/unregister"),
       "all": req(url, "POST", "/v2/systemsharedmemory/unregister")}
key, m = shm_object(4096, 0o600, "hijack")
res["take"] = req(url, "POST", "/v2/systemsharedmemory/region/victim/register", {"key": key, "byte_size": 4096})
res["read"] = req(url, "POST", "/v1/segmented_sum/forward", {
    "x": {"dtype": "float64", "shape": [3], "shm": {"region": "victim", "offset": 0}},
    "idx": [0, 0, 0], "num_segments": 1}, {"Content-Type": "application/json"})
res["mine"] = req(url, "POST", "/v2/systemsharedmemory/region/other/register", {"key": key, "byte_size": 4096})
res["status2"] = req(url, "GET", "/v2/systemsharedmemory/status")
m.close()
os.unlink("/dev/shm" + key)
print(json.dumps(res))
""", d.url)
        res = json.loads(out)
        assert res["status"] == [200, "[]"], res["status"]
        assert res["one"][0] == 404 and res["unregister"][0] == 404, res
        assert res["all"][0] == 200
        st, body = res["take"]
        assert st == 400 and "in use by another user" in body, res["take"]
        st, body = res["read"]
        assert st == 404 and json.loads(body)["error"]["code"] == "shm_region_unknown", res["read"]
        assert res["mine"][0] == 200 and [r["name"] for r in json.loads(res["status2"][1])] == ["other"]
        # Root's region is intact, and root sees only its own.
        st, regions = shm_call(d.url, "GET", "/status")
        assert st == 200 and [r["name"] for r in regions] == ["victim"], regions
        st, _, data = request(d.url, "POST", "/v1/segmented_sum/forward",
                              json.dumps({"x": {"dtype": "float64", "shape": [3],
                                                "shm": {"region": "victim", "offset": 0}},
                                          "idx": [0, 0, 0], "num_segments": 1}).encode(),
                              {"Content-Type": "application/json"})
        assert st == 200 and json.loads(data)["out"]["data"] == [6.0], data
    finally:
        obj.close()


def test_the_overflow_uid_is_no_uid(daemon):
    uid = overflow_uid()
    p = python_for(uid)
    if p is None:
        pytest.skip("cannot run a client as the overflow uid")
    d = daemon()
    out = run_as(uid, p, r"""
key, m = shm_object(4096, 0o600, "ovf")
print(json.dumps(req(sys.argv[1], "POST", "/v2/systemsharedmemory/region/o/register", {"key": key, "byte_size": 4096})))
m.close()
os.unlink("/dev/shm" + key)
""", d.url)
    st, body = json.loads(out)
    assert st == 400 and "whose uid the kernel reports" in body, body


# ---- 4: unread answers hold only their peer's share -----------------------------------------------

HOLD_ANSWERS = r"""
url, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
u = urllib.parse.urlparse(url)
body = json.dumps({"x": [], "idx": [], "num_segments": n}).encode()
socks = []
for _ in range(k):  # answers of 8 n bytes, never read
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: the window stays small
    s.connect((u.hostname, u.port))
    s.sendall(b"POST /v1/segmented_sum/forward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Accept: application/msgpack\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    socks.append(s)
print("ready", flush=True)
time.sleep(float(sys.argv[4]))
"""


def test_one_peer_holds_only_its_share_of_the_budget(daemon, py):
    # (the share by default: half of --max-inflight-bytes; stalled answers are not cut in this test's time)
    d = daemon("--max-body-bytes", "1M", "--max-inflight-bytes", "80M", "--idle-timeout", "60")
    holder = subprocess.Popen(argv_as(OTHER_UID, py, HOLD_ANSWERS, d.url, str(1 << 20), "10", "8"),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # every answer queued (or refused) by now
        # A 16 MiB answer: it fits beside the other peer's half, not in what one peer leaves of all.
        body = json.dumps({"x": [], "idx": [], "num_segments": 2 << 20}).encode()
        for _ in range(3):
            st, _, data = request(d.url, "POST", "/v1/segmented_sum/forward", body,
                                  {"Content-Type": "application/json", "Accept": "application/msgpack"}, timeout=30)
            assert st == 200 and len(data) > 16 << 20, data[:300]
    finally:
        holder.kill()
        holder.wait()


# ---- 6: connection slots --------------------------------------------------------------------------

HOLD_CONNECTIONS = r"""
url, k, t = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
u = urllib.parse.urlparse(url)
socks = [socket.create_connection((u.hostname, u.port)) for _ in range(k)]
print("ready", flush=True)
time.sleep(t)
"""


def _hold(py, uid, url, k, t):
    p = subprocess.Popen(argv_as(uid, py, HOLD_CONNECTIONS, url, str(k), str(t)), stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_one_peer_cannot_take_every_connection(daemon, py):
    d = daemon("--max-connections", "16", "--idle-timeout", "30")  # 8 a peer by default
    hog = _hold(py, OTHER_UID, d.url, 40, 8)
    try:
        time.sleep(0.5)
        t0 = time.time()
        st, _, _ = request(d.url, "GET", "/healthz", timeout=5)
        assert st == 200
        st, _, body = good(d.url)
        assert st == 200, body
        assert time.time() - t0 < 3
    finally:
        hog.kill()
        hog.wait()


def test_a_full_house_still_answers_health_checks(daemon, py):
    if python_for(THIRD_UID) is None:
        pytest.skip("cannot run a client as a third uid")
    d = daemon("--max-connections", "16", "--idle-timeout", "30")  # 8 a peer by default
    hogs = [_hold(py, OTHER_UID, d.url, 8, 8), _hold(py, THIRD_UID, d.url, 8, 8)]
    try:
        time.sleep(0.5)
        st, hd, _ = request(d.url, "GET", "/healthz", timeout=5)
        assert st == 200 and hd.get("connection", "").lower() == "close"
        st, _, body = good(d.url)
        assert st == 503 and "--max-connections" in json.loads(body)["error"]["message"], body
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def test_a_daemon_of_its_own_user_hands_out_none_of_its_objects(py, tmp_path):
    """The daemon run as its own user (the documented hardening): a client of another uid cannot
    register the daemon user's objects through it, and segops' own client, which names no shared
    memory (its memory travels as descriptors over the native channel, or as HTTP bodies), is served."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))
    import segops

    binary = os.environ.get("SEGOPSD")
    if not binary:
        pytest.skip("$SEGOPSD does not name a built segopsd")
    from segopsd_proc import Daemon

    d = Daemon(binary, [], wrapper=["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups"])
    key = None
    try:
        out = run_as(OTHER_UID, py, r"""
key, m = shm_object(4096, 0o600, "daemons")
m.close()
print(key)
""")
        key = out.strip()
        st, body = register(d.url, "theirs", key, 4096)  # root asks for the daemon user's object
        assert st == 400 and "not the requesting client's" in body["error"], body
        c = segops.Client(d.url, timeout=30)
        x = np.arange(1.0, 7.0)
        got = c.segmented_sum(x, np.array([0, 0, 1, 1, 1, 2], np.int32), 3)
        assert got.tolist() == [3.0, 12.0, 6.0] and c.transport_used in ("native", "unix", "http")
        c.close()
    finally:
        if key and os.path.exists("/dev/shm" + key):
            os.unlink("/dev/shm" + key)
        d.stop_and_check()
