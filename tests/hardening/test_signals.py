"""test_signals.py: every catchable signal that would end a process drains like SIGTERM with
jobs in flight (none lost, exit 0); SIGHUP is ignored (README.md, Configuration)."""
import json
import signal
import threading
import time

import pytest
from conftest import GOOD, OP, serving

DRAINING = ["SIGTERM", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGXCPU",
            "SIGXFSZ", "SIGPOLL", "SIGPWR", "SIGRTMIN", "SIGRTMAX"]


def _in_flight(d, n=6):
    res = [None] * n

    def one(i):
        try:
            c = d.conn(timeout=30)
            c.request("POST", OP.decode(), GOOD, {"Content-Type": "application/json"})
            r = c.getresponse()
            res[i] = (r.status, r.read())
            c.close()
        except Exception as e:  # noqa: BLE001 - recorded, asserted below
            res[i] = (None, repr(e).encode())

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    time.sleep(0.3)  # all sent; most wait behind the slow backend
    return ts, res


@pytest.mark.parametrize("name", DRAINING)
def test_signal_drains_with_jobs_in_flight(daemon, name):
    sig = getattr(signal, name, None)
    if sig is None:
        pytest.skip(f"{name} does not exist here")
    d = daemon("--max-batch-elements", "0", "--log-level", "info", env={"SEGOPS_TEST_DELAY_MS": "150"},
               test_build=True)
    ts, res = _in_flight(d)
    d.proc.send_signal(sig)
    for t in ts:
        t.join(30)
    assert d.proc.wait(timeout=30) == 0, d.stderr_text()[-2000:]
    assert [r[0] for r in res] == [200] * len(res), res
    for r in res:
        assert json.loads(r[1])["out"]["data"] == [3.0, 12.0, 6.0]
    assert "draining" in d.stderr_text()


def test_sighup_is_ignored(daemon):
    d = daemon("--max-batch-elements", "0", "--log-level", "info", env={"SEGOPS_TEST_DELAY_MS": "150"},
               test_build=True)
    ts, res = _in_flight(d)
    for _ in range(3):
        d.proc.send_signal(signal.SIGHUP)
    for t in ts:
        t.join(30)
    assert d.proc.poll() is None
    assert [r[0] for r in res] == [200] * len(res), res
    assert serving(d)
    assert "SIGHUP" in d.stderr_text()
