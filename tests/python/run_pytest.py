"""run_pytest.py: CTest's entry to the Python client tests. Exits 77 (CTest skip) when a module
the tests need is not importable, so a missing torch or numpy shows as SKIPPED, never PASSED.

usage: run_pytest.py [--require MOD ...] [--skip-if-all-skipped] -- PYTEST-ARGS...
--skip-if-all-skipped: exit 77 when tests ran but every one skipped (a feature the daemon
does not have yet), so CTest shows SKIPPED rather than passed."""

import importlib
import sys


def main(argv):
    if "--" in argv:
        cut = argv.index("--")
        own, rest = argv[:cut], argv[cut + 1 :]
    else:
        own, rest = [], argv
    need = ["numpy", "msgpack", "pytest"]
    all_skipped_is_skip = False
    i = 0
    while i < len(own):
        if own[i] == "--require" and i + 1 < len(own):
            need.append(own[i + 1])
            i += 2
        elif own[i] == "--skip-if-all-skipped":
            all_skipped_is_skip = True
            i += 1
        else:
            print(f"run_pytest.py: unknown option {own[i]!r}", file=sys.stderr)
            return 2
    for mod in need:
        try:
            importlib.import_module(mod)
        except Exception as e:  # ImportError, or a broken install that fails on import
            print(f"SKIP: python module {mod!r} is not importable ({e}); install it to run these tests")
            return 77
    import pytest

    counts = {}

    class Count:
        def pytest_runtest_logreport(self, report):
            if report.when == "call" or report.outcome == "skipped":
                counts[report.outcome] = counts.get(report.outcome, 0) + 1

    rc = pytest.main(rest, plugins=[Count()])
    if all_skipped_is_skip and rc == pytest.ExitCode.OK and counts.get("skipped") and not counts.get("passed"):
        print("SKIP: every test skipped (see the reasons above)")
        return 77
    if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
        print("run_pytest.py: pytest collected no tests")
        return 1
    return int(rc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
