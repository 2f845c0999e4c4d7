"""test_devices.py: several backend devices (workers) share the work, and each shows in the
per-device metrics (on the CPU backend, which needs no GPU: it has one device per --threads; the
test build's delay keeps each call on its worker long enough for the others to take the rest)."""
import re
import threading

from client import JSON, info, request

GOOD = b'{"x":[1,2,3,4,5,6],"idx":[0,0,1,1,1,2],"num_segments":3}'


def busy_by_device(url):
    text = request(url, "GET", "/metrics")[2].decode()
    return {int(d): float(v) for d, v in
            re.findall(r'^segops_device_busy_seconds_total\{device="(\d+)"\} (\S+)$', text, re.M)}


def test_two_workers_both_receive_work(daemon_factory):
    d = daemon_factory("--backend", "cpu", "--threads", "2", "--max-batch-elements", "0",
                       env={"SEGOPS_TEST_DELAY_MS": "150"}, test_build=True)
    assert sum(x["workers"] for x in info(d.url)["devices"]) == 2  # one host entry, two workers
    assert busy_by_device(d.url) == {0: 0.0, 1: 0.0}
    codes = []

    def one():
        codes.append(request(d.url, "POST", "/v1/segmented_sum/forward", GOOD, {"Content-Type": JSON})[0])

    ts = [threading.Thread(target=one) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert codes == [200] * 8
    busy = busy_by_device(d.url)
    # Eight calls of >= 150 ms on two workers: each ran some (0.15 s at least), none ran all.
    assert set(busy) == {0, 1} and all(v >= 0.14 for v in busy.values()), busy
    assert sum(busy.values()) >= 8 * 0.14, busy
