"""client.py: plain http.client helpers for the tests: requests, msgpack/JSON tensor encoding."""
import http.client
import json
import urllib.parse

import msgpack
import numpy as np

MSGPACK = "application/msgpack"
JSON = "application/json"
NP = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64}


def conn_for(url, timeout=60):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)


def request(url, method, path, body=None, headers=None, conn=None, timeout=60):
    """One request; returns (status, headers dict with lower-case keys, body bytes)."""
    own = conn is None
    c = conn or conn_for(url, timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        if own:
            c.close()


def tensor_msgpack(a, dtype=None):
    a = np.ascontiguousarray(a, dtype=dtype or a.dtype)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.tobytes()}


def tensor_json(a, dtype=None):
    a = np.ascontiguousarray(a, dtype=dtype or a.dtype)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": [x.item() for x in a.reshape(-1)]}


def encode(args, idx, S, enc, dtype="float64", outputs=None):
    """Body bytes for a request with float args (dict of arrays), idx and num_segments."""
    t = tensor_msgpack if enc == MSGPACK else tensor_json
    body = {k: t(v, dtype) for k, v in args.items()}
    body["idx"] = t(np.asarray(idx), np.int32)
    body["num_segments"] = int(S)
    if outputs is not None:
        body["outputs"] = list(outputs)
    if enc == MSGPACK:
        return msgpack.packb(body, use_bin_type=True)
    return json.dumps(body).encode()


def decode(data, ctype):
    """Response body -> {name: ndarray}."""
    if ctype.startswith("application/json"):
        obj = json.loads(data)
        return {k: np.array(v["data"], dtype=NP[v["dtype"]]).reshape(v["shape"]) for k, v in obj.items()}
    obj = msgpack.unpackb(data, raw=False)
    return {k: np.frombuffer(v["data"], dtype=NP[v["dtype"]]).reshape(v["shape"]) for k, v in obj.items()}


def call(url, op, pas, args, idx, S, enc=MSGPACK, accept=None, dtype="float64", outputs=None, conn=None,
         headers=None):
    """POST one op; returns (status, headers, decoded outputs or the error object)."""
    h = {"Content-Type": enc}
    if accept:
        h["Accept"] = accept
    h.update(headers or {})
    st, hd, data = request(url, "POST", f"/v1/{op}/{pas}", encode(args, idx, S, enc, dtype, outputs), h, conn)
    if st == 200:
        return st, hd, decode(data, hd.get("content-type", ""))
    return st, hd, json.loads(data) if data else None


def info(url, headers=None):
    st, _, data = request(url, "GET", "/v1/info", headers=headers)
    assert st == 200, data
    return json.loads(data)
