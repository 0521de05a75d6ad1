#!/bin/sh
# `make bench`: every tests/bench_* program, then the PyTorch reference of
# the decoding benchmark when Debian's python3-torch is there. Prints the
# OpenBLAS kernel first so figures can be compared across machines.
# bench_step (training and evaluation steps) runs once per shape (16 x 64 and
# 8 x 256, the model's seq_len = T) and precision (float32; bf16 when this
# build has oneDNN and the CPU avx512_bf16), each a process of its own so its
# peak RSS is its own, with the PyTorch reference interleaved in the same run
# when /usr/bin/python3 has torch.
set -u
BUILD=${XSA_BUILD:-build}
EXE=${XSA_EXE:-$BUILD/xsa}
cd "$(dirname "$0")/.." || exit 1
export XSA_ROOT=$(pwd)
# what the xsa executable sets for itself when unset (lua/main.c): the C
# benchmarks below measure the engine as xsa runs it
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}
"$EXE" --version
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}; OPENBLAS_THREAD_TIMEOUT=$OPENBLAS_THREAD_TIMEOUT; load average $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
TORCH=""
if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
    TORCH="--torch tests/reference/bench_torch.py"
else
    echo "skip: PyTorch reference steps and decode (no torch for /usr/bin/python3; apt-get install python3-torch)"
fi
PRECISIONS="f32"
if "$EXE" -e 'xsa.gpt{vocab = 8, d_model = 8, n_head = 1, precision = "bf16"}' >/dev/null 2>&1; then
    PRECISIONS="f32 bf16"
else
    echo "skip: bf16 steps ($("$EXE" -e 'print(select(2, pcall(xsa.gpt, {vocab = 8, d_model = 8, n_head = 1, precision = "bf16"})))' 2>&1))"
fi
for b in "$BUILD"/tests/bench_*; do
    [ -x "$b" ] || continue
    case "$(basename "$b")" in
    bench_step)
        for p in $PRECISIONS; do
            for shape in "16 64" "8 256"; do
                set -- $shape
                echo "== bench_step --batch $1 --seq $2 --precision $p"
                # shellcheck disable=SC2086
                "$b" --batch "$1" --seq "$2" --precision "$p" $TORCH || status=1
            done
        done
        ;;
    *)
        echo "== $(basename "$b")"
        "$b" || status=1
        ;;
    esac
done
# The PyTorch reference of bench_generate (cached greedy decode).
if [ -n "$TORCH" ]; then
    echo "== PyTorch reference: tests/reference/bench_generate_torch.py"
    /usr/bin/python3 tests/reference/bench_generate_torch.py "$("$EXE" -e 'io.write(xsa.blas().threads)')" || status=1
fi
exit $status
