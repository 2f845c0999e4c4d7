"""test_install.py: libsegops as an installed product. `cmake --install` of this build into a
temporary prefix; examples/c built out of tree against it twice, once through find_package(segops)
and once through pkg-config (the .pc file found where it was installed), each program run against
the real segopsd; and the installed tree holds the headers (segops.h and the segops_types.h it includes), the library with its soname link, the
pkg-config file and the CMake package.

usage: test_install.py BUILD_DIR SOURCE_DIR SEGOPSD [C_FLAGS]   (exit 77 without cmake or pkg-config)"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from segopsd_proc import Daemon  # noqa: E402


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def find(root, name):
    for d, _, files in os.walk(root):
        if name in files:
            return os.path.join(d, name)
    raise AssertionError(f"{name} is not installed under {root}")


def main(build, source, segopsd, flags=""):
    if not shutil.which("cmake") or not shutil.which("pkg-config"):
        print("SKIPPED: no cmake or pkg-config")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "prefix")
        run(["cmake", "--install", build, "--prefix", prefix])
        find(prefix, "segops.h")
        find(prefix, "segops_types.h")  # segops.h includes it
        lib = find(prefix, "libsegops.so")
        assert os.path.islink(lib), "libsegops.so is not the soname's link"
        pc = os.path.dirname(find(prefix, "segops.pc"))
        find(prefix, "segopsConfig.cmake")
        env = dict(os.environ, PKG_CONFIG_PATH=pc)
        words = run(["pkg-config", "--cflags", "--libs", "segops"], env=env).split()
        inc = [os.path.normpath(w[2:]) for w in words if w.startswith("-I")]
        assert inc == [os.path.join(prefix, "include")], f"pkg-config --cflags: {words}"  # found by ${pcfiledir}
        extra = [f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}"] if flags else []
        exes = {}
        for mode, opts in (("find_package", [f"-DCMAKE_PREFIX_PATH={prefix}"]),
                           ("pkg-config", ["-DSEGOPS_EXAMPLES_PKGCONFIG=ON"])):
            out = os.path.join(tmp, "build-" + mode)
            run(["cmake", "-S", os.path.join(source, "examples", "c"), "-B", out, "-DCMAKE_BUILD_TYPE=Release",
                 *opts, *extra], env=env)
            run(["cmake", "--build", out, "-j2"], env=env)
            exes[mode] = [find(out, "md_loop"), find(out, "pair_segops")]
        d = Daemon(segopsd, ["--backend", "cpu", "--threads", "1"])
        try:
            for mode, progs in exes.items():
                for prog in progs:
                    linked = run(["ldd", prog]) if shutil.which("ldd") else prefix
                    assert prefix in linked, f"{prog} does not use the installed libsegops:\n{linked}"
                    text = run([prog], env=dict(os.environ, SEGOPS_URL=d.url))
                    print(f"{mode} {os.path.basename(prog)}: {text.strip().splitlines()[-1]}")
        finally:
            status = d.stop()
        assert status == 0, f"segopsd exited {status}"
    print("test_install: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
