"""check_exports.py: libsegops exports its public API and nothing else: the dynamic symbols
`nm -D --defined-only` lists are exactly the functions segops.h declares SEGOPS_API (the op core,
the CPU backend and the transports inside it stay hidden), and the library's soname carries
SEGOPS_ABI_VERSION.

usage: check_exports.py LIBSEGOPS.so SEGOPS_H   (exit 77 without nm or readelf)"""

import re
import shutil
import subprocess
import sys


def main(lib, header):
    if not shutil.which("nm") or not shutil.which("readelf"):
        print("SKIPPED: no nm or readelf")
        return 77
    text = open(header).read()
    declared = set(re.findall(r"SEGOPS_API\s+[^;(]*?\b(segops_\w+)\s*\(", text))
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.strip()}
    exported = {s.split("@")[0] for s in exported}
    ok = True
    if exported - declared:
        print(f"exported but not in segops.h: {sorted(exported - declared)}")
        ok = False
    if declared - exported:
        print(f"declared in segops.h but not exported: {sorted(declared - exported)}")
        ok = False
    abi = re.search(r"#define SEGOPS_ABI_VERSION (\d+)", text).group(1)
    dyn = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True, text=True).stdout
    soname = re.search(r"\(SONAME\)\s+Library soname: \[(.*?)\]", dyn)
    if not soname or soname.group(1) != f"libsegops.so.{abi}":
        print(f"soname {soname and soname.group(1)}, want libsegops.so.{abi}")
        ok = False
    print(f"check_exports: {len(exported)} symbols exported, {len(declared)} declared: {'ok' if ok else 'FAILED'}")
    return 0 if ok and len(declared) > 30 else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
