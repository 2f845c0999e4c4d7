"""test_k8s.py: deploy/k8s/ parses, and the settings that must agree do, checked against the daemon
itself: its --help (flags, environment variables), the address and port it prints, its probe
endpoints, the metric the autoscaler reads, and the shutdown budget against the grace period; for
the per-node DaemonSet (deploy/k8s/node/), the host socket directory that it and its example worker
share, and the native channel it serves there. There is no cluster in CI: the daemon is run with
the manifests' own environment instead."""

import http.client
import json
import os
import re
import socket
import stat
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


def daemonset():
    (d,) = kind("DaemonSet")
    return d


def container(workload=None):
    cs = (workload or deployment())["spec"]["template"]["spec"]["containers"]
    return next(c for c in cs if c["name"] == "segopsd")


def native_job():
    (j,) = [j for j in kind("Job") if j["metadata"]["name"] == "segops-native-client-example"]
    return j


def env_of(c):
    return {e["name"]: e.get("value") for e in c.get("env", [])}


def test_every_manifest_parses_and_has_a_kind():
    assert {"deployment.yaml", "service.yaml", "kustomization.yaml", "client-job.yaml",
            "keda/scaledobject.yaml", "keda/kustomization.yaml", "node/daemonset.yaml", "node/client-job.yaml",
            "node/kustomization.yaml"} <= set(DOCS)
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
    (node,) = DOCS["node/kustomization.yaml"]
    assert set(node["resources"]) == {"daemonset.yaml"}  # never beside a Deployment's replicas
    assert DOCS["kustomization.yaml"][0]["images"][0]["name"] == container()["image"].split(":")[0]


def test_flags_and_env_names_are_the_daemons(help_text):
    for c in (container(), container(daemonset())):
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
    job = next(j for j in kind("Job") if j["metadata"]["name"] == "segops-client-example")
    job_env = env_of(job["spec"]["template"]["spec"]["containers"][0])
    assert job_env["SEGOPS_URL"] == f"http://{svc['metadata']['name']}:{sp['port']}"


def test_probes():
    c = container()
    for probe, path in (("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        g = c[probe]["httpGet"]
        assert g["path"] == path, probe
        assert g["port"] in ("http", c["ports"][0]["containerPort"]), probe


def test_drain_fits_the_grace_period():
    for w in (deployment(), daemonset()):
        c = container(w)
        env = env_of(c)
        grace = w["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        cmd = c["lifecycle"]["preStop"]["exec"]["command"]
        assert cmd[0] == "sleep"
        total = float(cmd[1]) + float(env["SEGOPS_DRAIN_SECONDS"]) + float(env["SEGOPS_SHUTDOWN_TIMEOUT"])
        assert float(env["SEGOPS_DRAIN_SECONDS"]) > 0
        assert total < grace, f"{w['kind']}: preStop + drain + shutdown timeout = {total} s, grace period {grace} s"


def unix_listen_path(env):
    (u,) = [a[len("unix:"):] for a in env["SEGOPS_LISTEN"].split(",") if a.startswith("unix:")]
    return u


def test_the_deployment_serves_http_only():
    assert env_of(container())["SEGOPS_NATIVE_SOCKET"] == "off"


def test_daemonset_and_worker_share_the_socket_directory():
    """One daemon per node; its sockets in a hostPath directory that the example worker mounts at
    the same path (the path /v1/info reports is the daemon's), with the group that the sockets'
    mode lets in, the daemon's HTTP unix socket as its URL, and the token from the same Secret."""
    ds = daemonset()
    assert "replicas" not in ds["spec"]
    spec = ds["spec"]["template"]["spec"]
    c = container(ds)
    env = env_of(c)
    sock_dir = os.path.dirname(env["SEGOPS_NATIVE_SOCKET"])
    assert os.path.dirname(unix_listen_path(env)) == sock_dir
    vols = {v["name"]: v for v in spec["volumes"]}
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == sock_dir)
    host = vols[mount["name"]]["hostPath"]
    assert host["path"] == sock_dir and host["type"] == "DirectoryOrCreate"
    gid, uid = spec["securityContext"]["runAsGroup"], spec["securityContext"]["runAsUser"]
    mode = int(env["SEGOPS_SOCKET_MODE"], 8)
    assert mode & 0o060 == 0o060 and mode & 0o007 == 0  # the group reads and writes, others nothing
    (init,) = spec["initContainers"]
    assert f"chown {uid}:{gid} {sock_dir}" in " ".join(init["command"])
    assert any(m["mountPath"] == sock_dir and m["name"] == mount["name"] for m in init["volumeMounts"])
    job = native_job()["spec"]["template"]["spec"]
    (w,) = job["containers"]
    wm = next(m for m in w["volumeMounts"] if m["mountPath"] == sock_dir)
    wv = next(v for v in job["volumes"] if v["name"] == wm["name"])
    assert wv["hostPath"]["path"] == sock_dir
    assert gid in job["securityContext"]["supplementalGroups"] and job["securityContext"]["runAsUser"] != uid
    assert job.get("nodeSelector") == spec["nodeSelector"]
    wenv = {e["name"]: e for e in w["env"]}
    assert wenv["SEGOPS_URL"]["value"] == "unix://" + unix_listen_path(env)
    token = vols[next(m["name"] for m in c["volumeMounts"] if m["mountPath"] == "/var/run/secrets/segops")]
    ref = wenv["SEGOPS_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == token["secret"]["secretName"]
    assert not any(m["mountPath"] == "/dev/shm" for m in w["volumeMounts"])  # memory travels as descriptors


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(self.path)


def test_daemon_runs_with_the_daemonsets_settings(segopsd):
    """The DaemonSet's environment with its socket directory moved to a temporary one and port 0:
    both sockets appear with the manifest's mode, /v1/info over the unix socket names the native
    channel's socket, and the native socket takes a connection."""
    c = container(daemonset())
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEGOPS_")}
    env.update(env_of(c))
    sock_dir = os.path.dirname(env["SEGOPS_NATIVE_SOCKET"])
    with tempfile.TemporaryDirectory() as tmp:
        for k in ("SEGOPS_LISTEN", "SEGOPS_NATIVE_SOCKET"):
            env[k] = env[k].replace(sock_dir, tmp)
        env["SEGOPS_LISTEN"] = env["SEGOPS_LISTEN"].replace("0.0.0.0:8080", "127.0.0.1:0")
        tok = os.path.join(tmp, "token")
        with open(tok, "w") as f:
            f.write("k8s-test-token\n")
        env["SEGOPS_TOKEN_FILE"] = tok
        env["SEGOPS_DRAIN_SECONDS"] = "0"
        args = [a if a != "auto" else "cpu" for a in c.get("args", [])]
        p = subprocess.Popen([segopsd, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline().startswith("segopsd listening on http://127.0.0.1:"), p.stderr.read()
            native, http_sock = env["SEGOPS_NATIVE_SOCKET"], unix_listen_path(env)
            for path in (native, http_sock):
                st = os.stat(path)
                assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == int(env["SEGOPS_SOCKET_MODE"], 8)
            conn = UnixHTTPConnection(http_sock)
            conn.request("GET", "/v1/info", headers={"Authorization": "Bearer k8s-test-token"})
            info = json.loads(conn.getresponse().read())
            assert info["native"]["socket"] == native and info["native"]["version"] >= 1
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(native)
            s.close()
        finally:
            p.terminate()
            rc = p.wait(timeout=30)
        assert rc == 0


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
    job = next(j for j in kind("Job") if j["metadata"]["name"] == "segops-client-example")
    job = job["spec"]["template"]["spec"]["containers"][0]
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
