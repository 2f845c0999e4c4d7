"""setup.py: builds segops._native, the package's C extension, together with libsegops (the C client,
clients/c/), the op table and validation (core/) and the CPU backend (backends/cpu/) from this
repository's sources, so `pip install ./clients/python` needs no libsegops installed; the rest of
the package is pyproject.toml's.

The extension is for the stable ABI (Py_LIMITED_API 3.11, an abi3 wheel) on Python 3.11 and
later; on 3.10 (whose stable ABI lacks the buffer protocol) it is built against the full API of
that version. When it cannot be built (no C compiler, no Python or libcurl headers, ...) the
package installs without it and says why, here and in a warning at import
(segops.native_available() is then False): the pure-Python client (HTTP and unix sockets only)
is used. Environment: SEGOPS_NO_EXTENSION=1 skips the extension; SEGOPS_EXTENSION_STRICT=1 makes
a failed build an error (CMake's build of it for the tests)."""

import concurrent.futures
import os
import platform
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the repository (clients/python/../..)
LIMITED = sys.version_info >= (3, 11)  # the buffer protocol is in the stable ABI from 3.11
VERSION = "0.2.0"  # SEGOPS_VERSION, as CMakeLists.txt's project(VERSION) (CTest python_package checks)
MISSING_NOTE = "_native_missing.txt"  # in the installed package: why the extension is not there


def _files(folder, names=None, skip=()):
    path = os.path.join(ROOT, folder)
    if names is None:
        names = sorted(n for n in os.listdir(path) if n.endswith(".c") and n not in skip)
    return [os.path.join(path, n) for n in names]


def _sources():
    """(plain sources, CPU backend sources, the CPU backend's x86-64-v3 file or None)."""
    ext = _files("clients/python/native", ("module.c", "client.c", "inputs.c", "outputs.c"))
    lib = _files("clients/c/src")  # libsegops: every file of it
    core = _files("core", ("ops.c", "errors.c", "prepare.c", "backend.c", "hash.c", "idx_cache.c", "hostbuf.c",
                           "settings.c", "optable_json.c"))  # core/CMakeLists.txt's segops_core, segops_optable
    v3_name = "cpu_ops_avx2.c"
    cpu = _files("backends/cpu", skip=(v3_name,))
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    return ext + lib + core, cpu, os.path.join(ROOT, "backends", "cpu", v3_name) if x86 else None


def _headers():
    out = []
    for folder in ("clients/python/native", "clients/c/include", "clients/c/src", "core", "proto", "backends/cpu"):
        path = os.path.join(ROOT, folder)
        if os.path.isdir(path):
            out += [os.path.join(path, n) for n in sorted(os.listdir(path)) if n.endswith(".h")]
    return out


class Missing(Exception):
    """What the extension's build lacks, in words for the user."""


def _pkg_config(names):
    """pkg-config's flags of the first package of names that is installed, or None."""
    if not shutil.which("pkg-config"):
        raise Missing("pkg-config is not installed (Debian: apt install pkg-config)")
    for name in names:
        r = subprocess.run(["pkg-config", "--cflags", "--libs", name], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split()
    return None


def _dependency(names, debian):
    """(compiler flags, library names) of a dependency found with pkg-config."""
    flags = _pkg_config(names)
    if flags is None:
        raise Missing(f"{names[0]}'s development files are not installed (Debian: apt install {debian})")
    return [f for f in flags if not f.startswith("-l")], [f[2:] for f in flags if f.startswith("-l")]


class BuildExt(build_ext):
    """Builds the extension with per-file options and every file compiled in parallel; a build
    that cannot be done is reported, not raised (unless SEGOPS_EXTENSION_STRICT=1)."""

    def run(self):
        note = os.path.join(self.build_lib, "segops", MISSING_NOTE)
        if os.environ.get("SEGOPS_NO_EXTENSION") == "1":
            return self._report(note, "the package was installed with SEGOPS_NO_EXTENSION=1")
        try:
            self._preflight()
            super().run()
        except Exception as e:  # noqa: BLE001 (any failure of the build is reported the same way)
            if os.environ.get("SEGOPS_EXTENSION_STRICT") == "1":
                raise
            why = str(e) if isinstance(e, Missing) else f"building it failed: {type(e).__name__}: {e}"
            return self._report(note, why)
        if os.path.exists(note):
            os.remove(note)
        if self.inplace:
            stale = os.path.join(HERE, "src", "segops", MISSING_NOTE)
            if os.path.exists(stale):
                os.remove(stale)

    def _report(self, note, why):
        for ext in self.extensions:  # an earlier build's module must not ship as if this one made it
            stale = self.get_ext_fullpath(ext.name)
            if os.path.exists(stale):
                os.remove(stale)
        if self.inplace:
            note = os.path.join(HERE, "src", "segops", MISSING_NOTE)
        os.makedirs(os.path.dirname(note), exist_ok=True)
        with open(note, "w") as f:
            f.write(why.strip() + "\n")
        bar = "=" * 78
        sys.stderr.write(f"\n{bar}\nsegops-client: the C extension segops._native was NOT built: {why}\n"
                         "The pure-Python client (HTTP and unix sockets only) is installed; the native channel and\n"
                         "'local' need the extension. On Debian: apt install gcc python3-dev pkg-config\n"
                         f"libcurl4-openssl-dev libjansson-dev libmsgpack-dev (scripts/setup.sh), then reinstall.\n{bar}\n")

    def _preflight(self):
        """Says plainly what is missing before a compiler error would."""
        cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
        if not shutil.which(os.environ.get("CC", cc).split()[0]):
            raise Missing(f"no C compiler ({os.environ.get('CC', cc)}) is installed (Debian: apt install gcc)")
        inc = sysconfig.get_paths()["include"]
        if not os.path.exists(os.path.join(inc, "Python.h")):
            raise Missing(f"Python's headers are not installed (no {inc}/Python.h; Debian: apt install python3-dev)")
        if not os.path.exists(os.path.join(ROOT, "clients", "c", "include", "segops.h")):
            raise Missing(f"libsegops' sources are not beside this package ({ROOT}/clients/c): build it from a "
                          "checkout of the segops repository")
        ext = self.extensions[0]
        for names, debian in ((("libcurl",), "libcurl4-openssl-dev"), (("jansson",), "libjansson-dev"),
                              (("msgpack-c", "msgpack"), "libmsgpack-dev")):
            cflags, libs = _dependency(names, debian)
            ext.extra_compile_args += cflags
            ext.libraries += libs

    def build_extension(self, ext):
        plain, cpu, v3 = _sources()
        ext_path = self.get_ext_fullpath(ext.name)
        every = plain + cpu + ([v3] if v3 else []) + _headers()
        newest = max(os.path.getmtime(p) for p in every)
        if not self.force and os.path.exists(ext_path) and os.path.getmtime(ext_path) >= newest:
            return  # up to date
        base = ext.extra_compile_args + ["-std=c11", "-fvisibility=hidden", "-O2"]
        # The CPU backend as backends/cpu/CMakeLists.txt builds it: no fused multiply-add (the bits
        # must not depend on the target), and its functions again for x86-64-v3, picked at run time.
        cpu_flags = base + ["-ffp-contract=off"] + (["-DSEGOPS_CPU_HAVE_V3=1"] if v3 else [])
        jobs = [(src, base) for src in plain] + [(src, cpu_flags) for src in cpu]
        if v3:
            jobs.append((v3, cpu_flags + ["-march=x86-64-v3"]))
        objects = self._compile_all(ext, jobs)
        ext.sources = []
        ext.extra_objects = objects
        ext.extra_compile_args = []
        super().build_extension(ext)

    def _compile_all(self, ext, jobs):
        macros = ext.define_macros + [(m, None) for m in ext.undef_macros]

        def one(job):
            src, flags = job
            return self.compiler.compile([src], output_dir=self.build_temp, macros=macros,
                                         include_dirs=ext.include_dirs, extra_postargs=flags,
                                         debug=self.debug, depends=ext.depends)[0]

        workers = max(1, min(len(jobs), os.cpu_count() or 1))
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            return list(pool.map(one, jobs))


def _extension():
    macros = [("_GNU_SOURCE", None), ("SEGOPS_VERSION", f'"{VERSION}"')]
    if LIMITED:
        macros.append(("Py_LIMITED_API", "0x030B0000"))
    dirs = [os.path.join(ROOT, d) for d in ("clients/python/native", "clients/c/include", "clients/c/src", "core",
                                            "proto", "backends/cpu")]
    return Extension("segops._native", sources=["native/module.c"],  # (relative: setuptools lists it in manifests)
                     include_dirs=dirs, define_macros=macros, libraries=["pthread", "m"],
                     py_limited_api=LIMITED, extra_compile_args=[])


setup(
    ext_modules=[_extension()],
    cmdclass={"build_ext": BuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp311"}} if LIMITED else {},
)
