#!/bin/sh
# `make bench`: every tests/bench_* program, then nothing else. Prints the
# OpenBLAS kernel first so figures can be compared across machines.
set -u
BUILD=${XSA_BUILD:-build}
EXE=${XSA_EXE:-$BUILD/xsa}
cd "$(dirname "$0")/.." || exit 1
export XSA_ROOT=$(pwd)
"$EXE" --version
status=0
for b in "$BUILD"/tests/bench_*; do
    [ -x "$b" ] || continue
    echo "== $(basename "$b")"
    "$b" || status=1
done
exit $status
