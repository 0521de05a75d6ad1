#!/bin/sh
# `make bench`: every tests/bench_* program, then the PyTorch reference of
# the decoding benchmark when Debian's python3-torch is there. Prints the
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
# The PyTorch reference of bench_generate (cached greedy decode), with
# Debian's python3-torch; skipped with a line without it.
if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
    echo "== PyTorch reference: tests/reference/bench_generate_torch.py"
    /usr/bin/python3 tests/reference/bench_generate_torch.py "$("$EXE" -e 'io.write(xsa.blas().threads)')" || status=1
else
    echo "skip: PyTorch reference decode (no torch for /usr/bin/python3; apt-get install python3-torch)"
fi
exit $status
