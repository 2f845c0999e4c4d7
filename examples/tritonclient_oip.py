"""tritonclient_oip.py: segopsd driven by NVIDIA's tritonclient over the Open Inference Protocol
(KServe v2, under /v2): one model per function, named <op>_<pass>, version 1.

    SEGOPS_URL=http://127.0.0.1:8080 python examples/tritonclient_oip.py

Exits 77 (skipped) when tritonclient is not installed (pip install 'tritonclient[http]') or
the daemon does not serve /v2."""

import os
import sys
import urllib.error
import urllib.parse
import urllib.request

import numpy as np

SKIP = 77


def main():
    url = os.environ.get("SEGOPS_URL", "http://127.0.0.1:8080")
    try:
        import tritonclient.http as httpclient
    except ImportError as e:
        print(f"SKIP: tritonclient is not importable ({e}); pip install 'tritonclient[http]'")
        return SKIP
    try:
        urllib.request.urlopen(url.rstrip("/") + "/v2/health/live", timeout=10).read()
    except urllib.error.HTTPError as e:
        if e.code == 404:
            print(f"SKIP: {url} does not serve the Open Inference Protocol (/v2): 404")
            return SKIP
        raise
    host = urllib.parse.urlsplit(url).netloc
    c = httpclient.InferenceServerClient(host)
    assert c.is_server_live() and c.is_server_ready()
    model = "segmented_dot_forward"
    meta = c.get_model_metadata(model)
    print(f"{model}: inputs {[i['name'] for i in meta['inputs']]}, outputs {[o['name'] for o in meta['outputs']]}")

    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    y = np.ones((4, 3), dtype=np.float64)
    idx = np.array([0, 0, 1, 1], dtype=np.int32)
    args = (("x", x, "FP64"), ("y", y, "FP64"), ("idx", idx, "INT32"), ("num_segments", np.array([2], np.int64), "INT64"))
    inputs = []
    for name, arr, dt in args:
        t = httpclient.InferInput(name, list(arr.shape), dt)
        t.set_data_from_numpy(arr, binary_data=True)
        inputs.append(t)
    res = c.infer(model, inputs, outputs=[httpclient.InferRequestedOutput("out", binary_data=True)])
    out = res.as_numpy("out")
    want = np.array([x[:2].sum(), x[2:].sum()])
    print(f"out = {out} (expected {want})")
    return 0 if np.array_equal(out, want) else 1


if __name__ == "__main__":
    sys.exit(main())
