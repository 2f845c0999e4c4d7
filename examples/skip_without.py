"""skip_without.py MODULE -- COMMAND...: runs COMMAND, or exits 77 (CTest: skipped) when the
Python module MODULE is not importable."""

import importlib
import subprocess
import sys

if __name__ == "__main__":
    mod, sep, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
    assert sep == "--" and cmd, __doc__
    try:
        importlib.import_module(mod)
    except Exception as e:
        print(f"SKIP: python module {mod!r} is not importable ({e})")
        sys.exit(77)
    sys.exit(subprocess.run(cmd).returncode)
