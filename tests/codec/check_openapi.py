#!/usr/bin/env python3
"""check_openapi.py: proto/openapi.yaml parses, every $ref resolves, and its op, pass and error-code
enums are those of core/ops.def and the error table (proto/segops_types.h). Exits 77 (skip) without PyYAML."""
import re
import sys

try:
    import yaml
except ImportError:
    print("PyYAML not installed: skipped")
    sys.exit(77)

root = sys.argv[1]
doc = yaml.safe_load(open(f"{root}/proto/openapi.yaml"))
fails = []


def resolve(ref):
    node = doc
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def walk(o):
    if isinstance(o, dict):
        for k, v in o.items():
            if k == "$ref":
                try:
                    resolve(v)
                except KeyError:
                    fails.append(f"unresolved $ref {v}")
            else:
                walk(v)
    elif isinstance(o, list):
        for v in o:
            walk(v)


walk(doc)
opsdef = open(f"{root}/core/ops.def").read()
ops = re.findall(r"^SEGOPS_OP\(\w+, \"(\w+)\"\)", opsdef, re.M)
passes = re.findall(r"^SEGOPS_PASS\(\w+, \"(\w+)\"\)", opsdef, re.M)
# The daemon's codes: the error table's rows with an HTTP status (client-side rows have 0).
codes = sorted(set(re.findall(r'X\(\w+, -?\d+, "(\w+)", [1-9]\d*,', open(f"{root}/proto/segops_types.h").read())))
params = {p["name"]: p for p in doc["paths"]["/v1/{op}/{pass}"]["post"]["parameters"]}
if params["op"]["schema"]["enum"] != ops:
    fails.append(f"op enum {params['op']['schema']['enum']} != ops.def {ops}")
if params["pass"]["schema"]["enum"] != passes:
    fails.append(f"pass enum != ops.def {passes}")
enum = sorted(doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"])
if enum != codes:
    fails.append(f"error codes {enum} != errors.h {codes}")
for p in ["/v1/info", "/healthz", "/readyz", "/metrics", "/v2", "/v2/health/live", "/v2/health/ready",
          "/v2/models/{model}", "/v2/models/{model}/ready", "/v2/models/{model}/infer"]:
    if p not in doc["paths"]:
        fails.append(f"missing path {p}")
for f in fails:
    print("FAIL:", f)
print("openapi.yaml:", "ok" if not fails else f"{len(fails)} problem(s)")
sys.exit(1 if fails else 0)
