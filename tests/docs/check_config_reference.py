#!/usr/bin/env python3
"""check_config_reference.py: docs/configuration.md is what `segopsd --help-markdown` prints now, so the
configuration reference cannot go stale. On a difference it prints a unified diff and the command that
regenerates the file.

usage: check_config_reference.py SEGOPSD REPO_ROOT"""
import difflib
import os
import subprocess
import sys


def main():
    segopsd, root = sys.argv[1], sys.argv[2]
    path = os.path.join(root, "docs", "configuration.md")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEGOPS_")}  # the defaults, not this shell's
    now = subprocess.run([segopsd, "--help-markdown"], capture_output=True, text=True, check=True, env=env,
                         timeout=30).stdout
    with open(path, encoding="utf-8") as f:
        committed = f.read()
    if now == committed:
        print(f"ok: {path} matches segopsd --help-markdown ({now.count(chr(10))} lines)")
        return 0
    sys.stdout.writelines(difflib.unified_diff(committed.splitlines(True), now.splitlines(True),
                                               "docs/configuration.md (committed)", "segopsd --help-markdown"))
    print(f"\nFAIL: docs/configuration.md is stale; regenerate it: {segopsd} --help-markdown > {path}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
