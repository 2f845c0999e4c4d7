"""shm_util.py: real POSIX shared-memory objects (/dev/shm) for the shared-memory tests, and the
JSON calls of the registration endpoints."""
import itertools
import json
import mmap
import os

from client import request

_seq = itertools.count()


class ShmObject:
    """A /dev/shm object named /segops-test-<pid>-<n>, mapped here; unlinked by close()."""

    def __init__(self, size):
        self.key = f"/segops-test-{os.getpid()}-{next(_seq)}"
        self.path = "/dev/shm" + self.key
        self.fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        os.ftruncate(self.fd, size)
        self.size = size
        self.map = mmap.mmap(self.fd, size)

    def write(self, offset, data):
        self.map[offset:offset + len(data)] = data

    def read(self, offset, n):
        return bytes(self.map[offset:offset + n])

    def truncate(self, size):
        os.ftruncate(self.fd, size)

    def close(self):
        try:
            self.map.close()
        except BufferError:
            pass
        os.close(self.fd)
        if os.path.exists(self.path):
            os.unlink(self.path)


def shm_call(url, method, path, body=None, headers=None):
    """(status, decoded JSON body) of one shared-memory endpoint call."""
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    st, _, out = request(url, method, "/v2/systemsharedmemory" + path, data, headers)
    return st, json.loads(out) if out else None


def register(url, name, key, byte_size, offset=0, headers=None):
    return shm_call(url, "POST", f"/region/{name}/register", {"key": key, "offset": offset, "byte_size": byte_size},
                    headers)
