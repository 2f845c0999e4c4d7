"""test_package.py: the client as a package. It builds into a wheel named segops-client, with its C
extension compiled from the tree's sources, that installs into a clean venv (no network: --no-deps,
--no-index) whose `segops` command talks to the real daemon over the native channel; a build without
a C compiler installs the pure-Python package and says why, at build and at import; versions agree across CMakeLists.txt, the package and /v1/info; py.typed is
shipped; health() and ready() both return segops.Status (ready() says no while draining); the
`segops` command's info, health, ready and bench, and its exit statuses."""

import json
import os
import re
import shlex
import subprocess
import sys
import time
import zipfile

import pytest

import segops
from segopsd_proc import Daemon

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PKG = os.path.join(ROOT, "clients", "python")


def cmake_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(segops VERSION (\S+)", f.read()).group(1)


def test_versions_agree(client):
    assert segops.__version__ == cmake_version()
    assert client.info()["version"] == segops.__version__ or os.environ.get("SEGOPS_TEST_URL")


def test_status_type(client):
    h, r = client.health(), client.ready()
    assert isinstance(h, segops.Status) and isinstance(r, segops.Status)
    assert (h.ok, h.status, h.http_status) == (True, "ok", 200)
    assert (r.ok, r.status, r.http_status) == (True, "ready", 200)
    assert bool(h) and bool(r)


def test_ready_false_while_draining(start_daemon, own_daemons, segopsd_path):
    helptext = subprocess.run([segopsd_path, "--help"], capture_output=True, text=True).stdout
    if "--drain-seconds" not in helptext:
        pytest.skip("this segopsd has no --drain-seconds: no steady draining state to probe")
    d = start_daemon(args=("--drain-seconds", "5"))
    c = segops.Client(d.url)
    assert c.ready()
    d.proc.send_signal(15)
    deadline = time.time() + 5
    st = c.ready()
    while st.ok and time.time() < deadline:
        time.sleep(0.05)
        st = c.ready()
    assert not st and st == segops.Status(False, "draining", 503)
    assert c.health().ok  # alive while draining
    c.close()
    assert d.proc.wait(30) == 0


def run_cli(args, env_url=None, python=sys.executable):
    env = dict(os.environ)
    env.pop("SEGOPS_URL", None)
    if env_url:
        env["SEGOPS_URL"] = env_url
    return subprocess.run([python, "-m", "segops", *args], capture_output=True, text=True, env=env, timeout=120)


def test_cli_info_health_ready(server_url):
    r = run_cli(["info", "--url", server_url])
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert set(info["ops"]) == set(segops.OPS) and info["version"] == segops.__version__
    r = run_cli(["health"], env_url=server_url)
    assert r.returncode == 0 and r.stdout.strip() == f"{server_url}: ok (200)", r
    r = run_cli(["ready", "--url", server_url])
    assert r.returncode == 0 and "ready (200)" in r.stdout


def test_cli_bench(server_url):
    r = run_cli(["bench", "--url", server_url, "-n", "20", "--warmup", "2", "--op", "segmented_matvec", "--elements", "300"])
    assert r.returncode == 0, r.stderr
    m = re.search(r"latency ms: p50 ([\d.]+)\s+p90 ([\d.]+)\s+p99 ([\d.]+)", r.stdout)
    assert m and 0 < float(m.group(1)) <= float(m.group(2)) <= float(m.group(3)), r.stdout
    assert re.search(r"\d+ calls/s", r.stdout)
    used = segops.Client(server_url).transport_used
    assert f"(transport {used}, one thread)" in r.stdout, r.stdout  # what the calls went over


def test_cli_into_a_closed_pipe(server_url):
    # `segops info | head -1`: the reader stops early; no BrokenPipeError traceback
    env = dict(os.environ)
    env.pop("SEGOPS_URL", None)
    # (`true` reads nothing and is gone long before the client has its answer to write)
    r = subprocess.run(f"{shlex.quote(sys.executable)} -m segops info --url {shlex.quote(server_url)} | true",
                       shell=True, capture_output=True, text=True, env=env, timeout=120)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr


def test_cli_errors():
    r = run_cli(["health", "--url", "http://127.0.0.1:1", "--timeout", "2"])
    assert r.returncode == 2 and "segops health:" in r.stderr and "connection" in r.stderr
    r = run_cli(["bench", "-n", "0", "--url", "http://127.0.0.1:1"])
    assert r.returncode == 2 and "-n must be >= 1" in r.stderr
    r = run_cli(["--version"])
    assert r.returncode == 0 and r.stdout.strip() == f"segops-client {segops.__version__}"


def build_wheel(out, env=None, verbose=False, pkg=PKG):
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-v" if verbose else "-q", "-w", str(out), str(pkg)],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, **(env or {})),
    )
    if r.returncode != 0 and ("No module named" in r.stderr or "invalid command 'bdist_wheel'" in r.stderr):
        pytest.skip("cannot build a wheel offline here: pip, setuptools or wheel missing (scripts/setup.sh --test installs them)")
    assert r.returncode == 0, r.stderr
    (whl,) = [p for p in os.listdir(out) if p.endswith(".whl")]
    return os.path.join(out, whl), r.stdout + r.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return build_wheel(tmp_path_factory.mktemp("wheel"), {"SEGOPS_EXTENSION_STRICT": "1"})[0]


EXT = "segops/_native.abi3.so" if sys.version_info >= (3, 11) else None  # the stable ABI's name (3.10: cpython-310)


def test_wheel_contents(wheel):
    name = os.path.basename(wheel)
    assert name.startswith(f"segops_client-{segops.__version__}-"), name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith("METADATA"))).decode()
        entry = z.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "segops/py.typed" in names and "segops/torch.py" in names and "segops/cli.py" in names
    assert any(n.startswith("segops/_native") and n.endswith(".so") for n in names), names
    assert EXT is None or (EXT in names and "-abi3-" in name), name  # one wheel for every CPython >= 3.11
    assert "segops/_native_missing.txt" not in names
    assert "Name: segops-client" in meta and "Requires-Python: >=3.10" in meta
    assert "Provides-Extra: torch" in meta and re.search(r"Requires-Dist: torch>=2\.4.*extra == .torch.", meta)
    assert "segops = segops.cli:main" in entry


def test_clean_venv_install_and_cli(wheel, tmp_path, server_url):
    venv = tmp_path / "v"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "SEGOPS_URL")}

    def run(*argv, **kw):
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300, **kw)

    assert run(sys.executable, "-m", "venv", str(venv)).returncode == 0
    py = str(venv / "bin" / "python")
    r = run(py, "-m", "pip", "install", "--disable-pip-version-check", "--no-deps", "--no-index", wheel)
    assert r.returncode == 0, r.stderr
    show = run(py, "-m", "pip", "show", "segops-client").stdout
    assert "Name: segops-client" in show and f"Version: {segops.__version__}" in show, show
    # numpy and msgpack (the wheel's dependencies) from this interpreter, without network:
    # a .pth line adds their directory after the venv's own site-packages.
    site = run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    deps = {os.path.dirname(os.path.dirname(m.__file__)) for m in (__import__("numpy"), __import__("msgpack"))}
    with open(os.path.join(site, "segops_test_deps.pth"), "w") as f:
        f.write("\n".join(sorted(deps)) + "\n")
    where = run(py, "-c", "import segops; print(segops.__file__, segops.native_available())")
    assert where.stdout.split()[0].startswith(str(venv)) and where.stdout.split()[1] == "True", where
    used = run(py, "-c", f"import segops; c = segops.Client({server_url!r}); c.info(); print(c.transport_used)")
    assert used.stdout.strip() == "native", used
    r = run(str(venv / "bin" / "segops"), "info", "--url", server_url)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["version"] == segops.__version__
    r = run(str(venv / "bin" / "segops"), "health", "--url", server_url)
    assert r.returncode == 0 and "ok (200)" in r.stdout, r


def test_without_a_compiler_the_package_installs_and_says_why(tmp_path):
    # (from a copy of the package: the tree's own build folder keeps its extension for the next build)
    import shutil

    pkg = tmp_path / "pkg"
    shutil.copytree(PKG, pkg, ignore=shutil.ignore_patterns("build", "*.egg-info", "_native*.so", "__pycache__"))
    out = tmp_path / "wheel"
    whl, log = build_wheel(out, {"CC": str(tmp_path / "no-such-cc")}, verbose=True, pkg=pkg)
    assert "segops._native was NOT built" in log and "no C compiler" in log, log[-3000:]
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        note = z.read("segops/_native_missing.txt").decode()
    assert not any(n.startswith("segops/_native") and n.endswith(".so") for n in names), names
    assert "no C compiler" in note
    # installed, it warns at import with that reason and runs the pure-Python client
    site = tmp_path / "site"
    with zipfile.ZipFile(whl) as z:
        z.extractall(site)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEGOPS_")}
    env["PYTHONPATH"] = str(site)
    r = subprocess.run([sys.executable, "-c", "import segops; print(segops.native_available())"], capture_output=True,
                       text=True, env=env, cwd=str(tmp_path), timeout=60)
    assert r.stdout.strip() == "False" and "no C compiler" in r.stderr and "ExtensionWarning" in r.stderr, r
