"""test_k8s.py: deploy/k8s/ parses, and the settings that must agree do, checked against the daemon
itself: its --help (flags, environment variables), the address and port it prints, its probe
endpoints, the metric the autoscaler reads, and the shutdown budget against the grace period.
There is no cluster in CI: the daemon is run with the Deployment's own environment instead."""

import json
import os
import re
import subprocess
import tempfile
import urllib.request

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
K8S = os.path.join(ROOT, "deploy", "k8s")


def load_all():
    docs = {}
    for dirpath, _, files in os.walk(K8S):
        for f in sorted(files):
            if f.endswith((".yaml", ".yml")):
                path = os.path.join(dirpath, f)
                with open(path) as fh:
                    docs[os.path.relpath(path, K8S)] = [d for d in yaml.safe_load_all(fh) if d is not None]
    return docs


DOCS = load_all()


def kind(k):
    found = [d for ds in DOCS.values() for d in ds if d.get("kind") == k]
    assert found, f"no {k} in deploy/k8s"
    return found


@pytest.fixture(scope="module")
def segopsd():
    path = os.environ.get("SEGOPSD")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("$SEGOPSD does not name a built segopsd")
    return path


@pytest.fixture(scope="module")
def help_text(segopsd):
    return subprocess.run([segopsd, "--help"], capture_output=True, text=True, timeout=10, check=True).stdout


def deployment():
    (d,) = kind("Deployment")
    return d


def container():
    cs = deployment()["spec"]["template"]["spec"]["containers"]
    return next(c for c in cs if c["name"] == "segopsd")


def env_of(c):
    return {e["name"]: e.get("value") for e in c.get("env", [])}


def test_every_manifest_parses_and_has_a_kind():
    assert {"deployment.yaml", "service.yaml", "kustomization.yaml", "client-job.yaml",
            "keda/scaledobject.yaml", "keda/kustomization.yaml"} <= set(DOCS)
    for f, ds in DOCS.items():
        assert ds, f
        for d in ds:
            assert d.get("apiVersion") and d.get("kind"), f


def test_kustomizations_list_files_that_exist():
    for f, ds in DOCS.items():
        for d in ds:
            if d["kind"] != "Kustomization":
                continue
            base = os.path.dirname(os.path.join(K8S, f))
            for r in d["resources"]:
                assert os.path.exists(os.path.join(base, r)), f"{f}: {r}"
    (base,) = DOCS["kustomization.yaml"]
    assert set(base["resources"]) == {"deployment.yaml", "service.yaml"}
    assert DOCS["kustomization.yaml"][0]["images"][0]["name"] == container()["image"].split(":")[0]


def test_flags_and_env_names_are_the_daemons(help_text):
    c = container()
    for a in c.get("args", []):
        if a.startswith("--"):
            assert re.search(rf"^\s+{re.escape(a)}\b", help_text, re.M), f"{a} is not in segopsd --help"
    for name in env_of(c):
        if name.startswith("SEGOPS_"):
            assert f"[env {name}]" in help_text or f"[env {name}]" in help_text.replace("\n", " "), name


def test_ports_agree():
    c = container()
    listen = env_of(c)["SEGOPS_LISTEN"]
    host, port = listen.rsplit(":", 1)
    assert host == "0.0.0.0"  # so the token below is required (segopsd refuses otherwise)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports["http"] == int(port)
    (svc,) = kind("Service")
    sp = svc["spec"]["ports"][0]
    assert sp["targetPort"] in ("http", int(port))
    assert svc["spec"]["selector"].items() <= deployment()["spec"]["template"]["metadata"]["labels"].items()
    job_env = env_of(kind("Job")[0]["spec"]["template"]["spec"]["containers"][0])
    assert job_env["SEGOPS_URL"] == f"http://{svc['metadata']['name']}:{sp['port']}"


def test_probes():
    c = container()
    for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        g = c[probe]["httpGet"]
        assert g["path"] == path, probe
        assert g["port"] in ("http", c["ports"][0]["containerPort"]), probe


def test_drain_fits_the_grace_period():
    c = container()
    env = env_of(c)
    grace = deployment()["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    cmd = c["lifecycle"]["preStop"]["exec"]["command"]
    assert cmd[0] == "sleep"
    total = float(cmd[1]) + float(env["SEGOPS_DRAIN_SECONDS"]) + float(env["SEGOPS_SHUTDOWN_TIMEOUT"])
    assert float(env["SEGOPS_DRAIN_SECONDS"]) > 0
    assert total < grace, f"preStop + drain + shutdown timeout = {total} s, grace period {grace} s"


def test_security_gpu_token_and_shm():
    spec = deployment()["spec"]["template"]["spec"]
    c = container()
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert int(c["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    vols = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    token_file = env_of(c)["SEGOPS_TOKEN_FILE"]
    tv = vols[mounts[os.path.dirname(token_file)]]
    secret = tv["secret"]
    assert any(i["path"] == os.path.basename(token_file) for i in secret["items"])
    assert spec["securityContext"]["fsGroup"] and secret["defaultMode"] & 0o040  # the non-root user reads it
    job = kind("Job")[0]["spec"]["template"]["spec"]["containers"][0]
    ref = next(e for e in job["env"] if e["name"] == "SEGOPS_TOKEN")["valueFrom"]["secretKeyRef"]
    assert ref["name"] == secret["secretName"] and ref["key"] == secret["items"][0]["key"]
    shm = vols[mounts["/dev/shm"]]["emptyDir"]
    assert shm["medium"] == "Memory"


def test_daemon_runs_with_the_deployments_settings(segopsd):
    """The Deployment's environment and args, with the token file made here and port 0: the
    daemon starts, its probes answer as the manifest expects, and the metric the autoscaler
    queries is one it exports."""
    c = container()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEGOPS_")}
    env.update(env_of(c))
    with tempfile.TemporaryDirectory() as tmp:
        tok = os.path.join(tmp, "token")
        with open(tok, "w") as f:
            f.write("k8s-test-token\n")
        env["SEGOPS_TOKEN_FILE"] = tok
        env["SEGOPS_LISTEN"] = env["SEGOPS_LISTEN"].rsplit(":", 1)[0] + ":0"
        args = [a if a != "auto" else "cpu" for a in c.get("args", [])]  # no GPU in CI
        p = subprocess.Popen([segopsd, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            m = re.match(r"segopsd listening on http://0\.0\.0\.0:(\d+)", p.stdout.readline())
            assert m, p.stderr.read() if p.poll() is not None else "no address line"
            base = f"http://127.0.0.1:{m.group(1)}"
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                path = c[probe]["httpGet"]["path"]
                assert urllib.request.urlopen(base + path, timeout=5).status == 200, probe
            req = urllib.request.Request(base + "/metrics", headers={"Authorization": "Bearer k8s-test-token"})
            metrics = urllib.request.urlopen(req, timeout=5).read().decode()
            info = json.loads(urllib.request.urlopen(urllib.request.Request(
                base + "/v1/info", headers={"Authorization": "Bearer k8s-test-token"}), timeout=5).read())
            assert info["auth"] is True
            assert info["limits"]["drain_seconds"] == float(env["SEGOPS_DRAIN_SECONDS"])
            assert info["limits"]["shutdown_timeout_s"] == float(env["SEGOPS_SHUTDOWN_TIMEOUT"])
        finally:
            p.terminate()
            rc = p.wait(timeout=30)  # after the manifest's 10 s drain
        assert rc == 0
    (so,) = kind("ScaledObject")
    assert so["spec"]["scaleTargetRef"]["name"] == deployment()["metadata"]["name"]
    query = so["spec"]["triggers"][0]["metadata"]["query"]
    names = re.findall(r"(segops_[a-z_]+)", query)
    assert names and all(re.search(rf"^{n}\b", metrics, re.M) for n in names), names
