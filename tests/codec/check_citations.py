"""check_citations.py ROOT: the repository cites only documents it contains. Fails, listing
each place, when a source, test or document file names "SPEC" or "GOLDEN" (design documents
that are not in the repository; the contract they held is proto/API.md), an issue of the tracker
by number ("issue 11": state the fact, the test or the command instead), or the machine a number
was measured on ("H200"), which only the files that report measurements name (MEASURED)."""

import os
import re
import sys

SKIP_DIRS = {".git", "build", ".venv", "__pycache__", "node_modules"}
# Ignored folders of output and carried copies (.gitignore: benchmark output, other trees to compare with).
SKIP_PATHS = {os.path.join("bench", "out"), "out", ".device"}
TEXT = (".c", ".h", ".cu", ".py", ".md", ".sh", ".txt", ".yaml", ".yml", ".toml", ".def", ".cmake", "")
CITES = re.compile(r"\bSPEC\b|GOLDEN")
PATTERN = re.compile(r"\bSPEC\b|GOLDEN|\b[Ii]ssue \d+|H200")
MEASURED = {"README.md", os.path.join("bench", "RESULTS.md"), "CHANGELOG.md"}
SELF = os.path.abspath(__file__)


def main(root):
    hits = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build") and not x.endswith(".egg-info")
                   and os.path.relpath(os.path.join(d, x), root) not in SKIP_PATHS]
        for f in files:
            path = os.path.join(d, f)
            if os.path.abspath(path) == SELF or os.path.splitext(f)[1] not in TEXT:
                continue
            pattern = CITES if os.path.relpath(path, root) in MEASURED else PATTERN
            try:
                with open(path, encoding="utf-8") as fh:
                    for n, line in enumerate(fh, 1):
                        if pattern.search(line):
                            hits.append(f"{os.path.relpath(path, root)}:{n}: {line.strip()[:120]}")
            except (UnicodeDecodeError, OSError):
                continue
    for h in hits:
        print(h)
    if hits:
        print(f"{len(hits)} citation(s) of documents or issues that are not in the repository, or of a lab machine: "
              "point them at proto/API.md, state the fact")
        return 1
    print("no citations of documents outside the repository")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
