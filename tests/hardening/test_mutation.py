"""test_mutation.py: a short hostile-input run: random mutations of valid requests
(bytes flipped, inserted, cut; heads and bodies) over raw sockets against the real segopsd,
checking that every answer is one well-formed response of an expected status class, JSON error
bodies where segopsd answers, that every connection is closed by the server once the client has
sent its FIN (a cut head, a cut body, a keep-alive connection after its answer: none waits for
the idle timeout), that the daemon stays alive and its RSS bounded. A fixed number of mutations
(SEGOPS_MUTATIONS, seed SEGOPS_MUTATION_SEED) runs on a few parallel connections, so what is
checked does not depend on the machine's speed."""
import os
import random
from concurrent.futures import ThreadPoolExecutor

from conftest import serving
from hostile import SEEDS, check_answer, exchange, mutate

COUNT = int(os.environ.get("SEGOPS_MUTATIONS", "600"))
IDLE_S = 30    # the daemon's --idle-timeout: far longer than any answer or close may take here
CLIENT_S = 15  # a connection still open after this, its client long done sending, is a failure


def test_random_mutations(daemon):
    d = daemon("--idle-timeout", str(IDLE_S), "--max-body-bytes", "1M")
    rng = random.Random(int(os.environ.get("SEGOPS_MUTATION_SEED", "11")))
    reqs = [mutate(rng, rng.choice(SEEDS)) for _ in range(COUNT)]
    with ThreadPoolExecutor(8) as pool:
        answers = pool.map(lambda q: exchange((d.host, d.port), q, CLIENT_S), reqs)
        for k, (req, (data, closed)) in enumerate(zip(reqs, answers)):
            assert closed, f"mutation {k}: the connection was still open {CLIENT_S} s after the client's FIN; " \
                           f"sent {req[:300]!r}, got {data[:200]!r}"
            check_answer(data)
            if k % 100 == 0:
                assert d.proc.poll() is None
    assert serving(d)
    rss = [int(x.split()[1]) for x in open(f"/proc/{d.proc.pid}/status") if x.startswith("VmRSS:")][0]
    assert rss < 512 * 1024, rss
