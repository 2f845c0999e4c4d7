"""test_info_schema.py: GET /v1/info's real answers against the Info schema of proto/openapi.yaml
(every field described, with its type, and no field the schema lacks), for a plain daemon, one
with a token and a unix listener, and one with its limits and settings changed; and its settings
are the rows of docs/configuration.md, each with the value the daemon was given."""
import json
import os
import re

import yaml

from client import info, request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
with open(os.path.join(ROOT, "proto", "openapi.yaml"), encoding="utf-8") as f:
    DOC = yaml.safe_load(f)

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


def check(value, schema, where, fails):
    """The subset of OpenAPI 3.0 schemas that openapi.yaml uses; appends a line per mismatch."""
    if "$ref" in schema:
        node = DOC
        for part in schema["$ref"][2:].split("/"):
            node = node[part]
        return check(value, node, where, fails)
    if "anyOf" in schema:
        if not any(not check(value, s, where, []) for s in schema["anyOf"]):
            fails.append(f"{where}: {value!r} matches none of {schema['anyOf']}")
        return fails
    t = schema.get("type")
    if t == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif t == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif t:
        ok = isinstance(value, TYPES[t])
    else:
        ok = True
    if not ok:
        fails.append(f"{where}: {value!r} is not {t}")
        return fails
    if "enum" in schema and value not in schema["enum"]:
        fails.append(f"{where}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in value:
                fails.append(f"{where}: required field {k!r} missing")
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                check(v, props[k], f"{where}.{k}", fails)
            elif extra is False:
                fails.append(f"{where}: field {k!r} is not in the schema")
            elif isinstance(extra, dict):
                check(v, extra, f"{where}.{k}", fails)
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            check(v, schema["items"], f"{where}[{i}]", fails)
    return fails


def assert_matches(answer):
    fails = check(answer, {"$ref": "#/components/schemas/Info"}, "info", [])
    assert not fails, "\n".join(fails)


def test_plain_daemon(daemon_factory):
    assert_matches(info(daemon_factory().url))


def test_token_and_unix_listener(daemon_factory, tmp_path):
    token = tmp_path / "token"
    token.write_text("schema-test-token\n")
    sock = tmp_path / "s.sock"
    d = daemon_factory("--token-file", str(token), "--listen", f"unix:{sock}")
    st, _, data = request(d.url, "GET", "/v1/info", headers={"Authorization": "Bearer schema-test-token"})
    assert st == 200
    answer = json.loads(data)
    assert_matches(answer)
    assert answer["auth"] is True and answer["settings"]["token"] is True
    assert answer["settings"]["token-file"] == str(token)
    assert any(u.startswith("unix:") for u in answer["listeners"]), answer["listeners"]


def test_settings_are_the_configuration_reference(daemon_factory):
    # --backend cpu: the CUDA settings are parsed and reported on any machine, and --devices 0,1 names
    # GPUs a one-GPU machine does not have (refused there by the CUDA backend, rightly).
    d = daemon_factory("--backend", "cpu", "--max-body-bytes", "3M", "--drain-seconds", "0.5", "--devices", "0,1",
                       "--cpu-isa", "baseline", env={"SEGOPS_IDX_CACHE_BYTES": "0", "SEGOPS_CUDA_WAIT": "block"})
    answer = info(d.url)
    assert_matches(answer)
    with open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8") as f:
        reference = f.read()
    documented = set(re.findall(r"^\| `--([a-z0-9-]+)`", reference, re.M)) | {"token"}
    assert set(answer["settings"]) == documented, set(answer["settings"]) ^ documented
    s = answer["settings"]
    assert s["max-body-bytes"] == 3 << 20 == answer["limits"]["max_body_bytes"]
    assert s["drain-seconds"] == 0.5 and s["devices"] == ["0", "1"] and s["cpu-isa"] == "baseline"
    assert s["idx-cache-bytes"] == 0 and s["cuda-wait"] == "block" and s["host-pool-bytes"] == "auto"
    assert s["allow-unauthenticated"] is False and s["token"] is False
