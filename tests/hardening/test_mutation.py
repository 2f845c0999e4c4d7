"""test_mutation.py: a short hostile-input run (issue 11): random mutations of valid requests
(bytes flipped, inserted, cut; heads and bodies) over raw sockets against the real segopsd,
checking that every answer is one well-formed response of an expected status class, JSON error
bodies where segopsd answers, that every connection is closed by the server once the client has
sent its FIN (a cut head, a cut body, a keep-alive connection after its answer: none waits for
the idle timeout), that the daemon stays alive and its RSS bounded. A fixed number of mutations
(SEGOPS_MUTATIONS, seed SEGOPS_MUTATION_SEED) runs on a few parallel connections, so what is
checked does not depend on the machine's speed."""
import json
import os
import random
import socket
from concurrent.futures import ThreadPoolExecutor

from conftest import GOOD, serving

COUNT = int(os.environ.get("SEGOPS_MUTATIONS", "600"))
IDLE_S = 30    # the daemon's --idle-timeout: far longer than any answer or close may take here
CLIENT_S = 15  # a connection still open after this, its client long done sending, is a failure
SEEDS = [
    b"POST /v1/segmented_sum/forward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(GOOD), GOOD),
    b"POST /v1/segmented_mul/backward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"x\":\r\n0\r\n\r\n",
    b"GET /v1/info HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /v2/models/segmented_sum_forward/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 2\r\n\r\n{}",
]
ALLOWED = {200, 400, 401, 404, 405, 406, 413, 415, 431, 501, 503, 505}  # 505: an unknown HTTP version


def mutate(rng, b):
    b = bytearray(b)
    for _ in range(rng.randint(1, 4)):
        k = rng.randrange(5)
        i = rng.randrange(len(b)) if b else 0
        if k == 0 and b:
            b[i] = rng.randrange(256)
        elif k == 1:
            b[i:i] = bytes(rng.choice([b"\0", b"%00", b"\r\n", b":", b",", b" ", b"9" * 20, b"%2F", b"\xff"]))
        elif k == 2 and b:
            del b[i:i + rng.randint(1, 8)]
        elif k == 3:
            b = b[:i]
        else:
            b[i:i] = b[i:i + rng.randint(1, 40)] * rng.randint(1, 50)
    return bytes(b)


def check_answer(data):
    if not data:
        return  # closed without an answer: a head libmicrohttpd could not parse at all
    assert data.startswith(b"HTTP/1.1 "), data[:200]
    hend = data.find(b"\r\n\r\n")
    assert hend > 0, data[:200]
    status = int(data[9:12])
    assert status in ALLOWED, data[:300]
    if status >= 400 and b"Content-Type: application/json" in data[:hend]:
        n = int(data[:hend].lower().split(b"content-length:")[1].split(b"\r\n")[0])
        body = json.loads(data[hend + 4:hend + 4 + n])
        assert "error" in body


def exchange(d, req):
    """Sends req, half-closes, reads until the server closes. Returns (bytes, closed_by_server)."""
    s = d.sock()
    s.settimeout(CLIENT_S)
    data = b""
    try:
        s.sendall(req)
        s.shutdown(socket.SHUT_WR)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data, True
            data += chunk
    except socket.timeout:
        return data, False
    except (ConnectionResetError, BrokenPipeError):
        return b"", True  # the server reset it: closed, no answer to check
    finally:
        s.close()


def test_random_mutations(daemon):
    d = daemon("--idle-timeout", str(IDLE_S), "--max-body-bytes", "1M")
    rng = random.Random(int(os.environ.get("SEGOPS_MUTATION_SEED", "11")))
    reqs = [mutate(rng, rng.choice(SEEDS)) for _ in range(COUNT)]
    with ThreadPoolExecutor(8) as pool:
        for k, (req, (data, closed)) in enumerate(zip(reqs, pool.map(lambda q: exchange(d, q), reqs))):
            assert closed, f"mutation {k}: the connection was still open {CLIENT_S} s after the client's FIN; " \
                           f"sent {req[:300]!r}, got {data[:200]!r}"
            check_answer(data)
            if k % 100 == 0:
                assert d.proc.poll() is None
    assert serving(d)
    rss = [int(x.split()[1]) for x in open(f"/proc/{d.proc.pid}/status") if x.startswith("VmRSS:")][0]
    assert rss < 512 * 1024, rss
