"""as_user.py: running a client as another uid (setpriv, root only) for the tests that need a second
local user (test_shm_users.py): a plain Python (stdlib only) that uid can run, and the snippets it
runs. No pytest here."""
import os
import shutil
import subprocess
import sys

OTHER_UID = 54321  # any uid but ours and the kernel's overflow uid
THIRD_UID = 54322


def overflow_uid():
    try:
        with open("/proc/sys/kernel/overflowuid") as f:
            return int(f.read())
    except OSError:
        return 65534


def _runs_as(uid, py):
    cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", py, "-c", "import http.client, json"]
    try:
        return subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def python_for(uid):
    """A Python interpreter uid can run, or None (not root, no setpriv, or none readable)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    for py in (sys.executable, getattr(sys, "_base_executable", None), "/usr/bin/python3", shutil.which("python3")):
        if py and os.path.exists(py) and _runs_as(uid, py):
            return py
    return None


def argv_as(uid, py, code, *args):
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", py, "-c", PRELUDE + code, *args]


def run_as(uid, py, code, *args, timeout=60):
    """Runs code as uid; returns its stdout (asserts it exited 0)."""
    r = subprocess.run(argv_as(uid, py, code, *args), capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"as uid {uid}: {r.stderr[-3000:]}"
    return r.stdout


# Helpers every snippet has: req(url, method, path, body=None, headers=None) -> (status, body
# text); shm_object(size, mode) -> (key, mmap) made by this uid.
PRELUDE = r"""
import http.client, json, mmap, os, socket, sys, time, urllib.parse
def req(url, method, path, body=None, headers=None, timeout=30):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    c.request(method, path, body, headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data.decode(errors="replace")
def shm_object(size, mode=0o600, tag="o"):
    key = f"/segops-test-uid{os.getuid()}-{os.getpid()}-{tag}"
    fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode)
    os.fchmod(fd, mode)
    os.ftruncate(fd, size)
    m = mmap.mmap(fd, size)
    os.close(fd)
    return key, m
"""
