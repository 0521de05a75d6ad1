#!/bin/sh
# `make bench`: every tests/bench_* program, then the PyTorch reference of
# the decoding benchmark when Debian's python3-torch is there. Prints the
# CPU, the OpenBLAS kernel, the float32 GEMM library (core/gemm.h), threads
# and load first so figures can be compared across machines; bench_peak
# runs first and its limits go to bench_step and bench_generate, which
# print their times against them.
# bench_gemm (OpenBLAS against oneDNN for each product of the step) runs a
# second time with the CPU's best OpenBLAS kernel when OPENBLAS_CORETYPE
# named another.
# bench_step (training and evaluation steps) runs once per shape (16 x 64 and
# 8 x 256, the model's seq_len = T) and precision (float32; bf16 when this
# build has oneDNN and the CPU avx512_bf16), each a process of its own so its
# peak RSS is its own, with the PyTorch reference interleaved in the same run
# when /usr/bin/python3 has torch.
# bench_grid: issue 38's grid of shapes (16 x 64 to 1 x 4096, 2 x 128 to
# 6 x 384), one process per shape, the median step (at least 3 and at
# least 4 s of steps) against its limit and its peak RSS, the goals marked
# met or not; bench_attention: attention's
# forward + backward alone from 64 to 4096 positions.
# tests/bench_attention_lua.lua: the training step with XSA written in Lua
# against the fused XSA at 16 x 64, as a ratio.
# bench_study (tests/bench_study.lua): the study's tokens/s beside the
# bench step's, one run at 2 threads and two side by side at 1 thread.
# bench_blocking (the lm_head's chunks and blocks: the rule against the
# blocking before it and two others, alternated in one process) runs at the
# same shapes and precisions.
set -u
BUILD=${XSA_BUILD:-build}
EXE=${XSA_EXE:-$BUILD/xsa}
cd "$(dirname "$0")/.." || exit 1
export XSA_ROOT=$(pwd)
# what the xsa executable sets for itself when unset (lua/main.c): the C
# benchmarks below measure the engine as xsa runs it
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}
# make bench ISA=avx2 (XSA_BENCH_ISA): the AVX2 paths on a wider CPU, as a
# stand-in for an AVX2-only machine, not one (the caches, clocks and memory
# stay this machine's): the engine's kernels from the build-isa-avx2 build
# (the Makefile), oneDNN and OpenBLAS held to AVX2, the limit the AVX2 FMA
# peak (XSA_PEAK_ISA, peak.h); float32 products through OpenBLAS, the
# engine's default where the CPU has no AVX-512 (core/gemm.c), unless
# XSA_GEMM says otherwise; no bf16, which needs AVX-512.
ISA=${XSA_BENCH_ISA:-}
case "$ISA" in
"") ;;
avx2) export ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell XSA_PEAK_ISA=avx2 XSA_GEMM=${XSA_GEMM:-openblas} ;;
*) echo "make bench: ISA=$ISA is not avx2 (or empty: the CPU's widest paths)" >&2; exit 2 ;;
esac
benches() {
    "$EXE" --version
    # the CPU as records name it: family and model tell the machine types
    # apart ("AMD EPYC" names them all: family 25 model 1 is Zen 3, family
    # 26 Zen 5); the best OpenBLAS kernel names its vector paths
    echo "CPU: $("$EXE" -e 'io.write(xsa.record.provenance().cpu, ", best OpenBLAS kernel ", xsa.blas().best or "none")'), $(grep -c '^processor' /proc/cpuinfo) logical CPUs; $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}; OPENBLAS_THREAD_TIMEOUT=$OPENBLAS_THREAD_TIMEOUT; XSA_GEMM=${XSA_GEMM:-(unset)}: float32 products through $("$EXE" -e 'io.write(xsa.blas().gemm_lib)'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
    [ -n "$ISA" ] && echo "ISA restricted: $ISA on this CPU (make bench ISA=$ISA; OpenBLAS Haswell and ONEDNN_MAX_CPU_ISA=AVX2, the engine's kernels built -mno-avx512f, the limit the AVX2 FMA peak): a stand-in for an AVX2-only machine, not one"
    status=0
    TORCH=""
    if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
        TORCH="--torch tests/reference/bench_torch.py"
    else
        echo "skip: PyTorch reference steps and decode (no torch for /usr/bin/python3; apt-get install python3-torch)"
    fi
    PRECISIONS="f32"
    if [ -n "$ISA" ]; then
        echo "skip: bf16 steps (ISA=$ISA: bf16 products need AVX-512)"
    elif "$EXE" -e 'xsa.gpt{vocab = 8, d_model = 8, n_head = 1, precision = "bf16"}' >/dev/null 2>&1; then
        PRECISIONS="f32 bf16"
    else
        echo "skip: bf16 steps ($("$EXE" -e 'print(select(2, pcall(xsa.gpt, {vocab = 8, d_model = 8, n_head = 1, precision = "bf16"})))' 2>&1))"
    fi
    # The machine's own limits first (tests/bench_peak.c): its machine-readable
    # "peak ..." lines give bench_step and bench_generate the limits their
    # times are printed against ("x its limit").
    PEAK_STEP=""
    PEAK_GEN=""
    if [ -x "$BUILD/tests/bench_peak" ]; then
        echo "== bench_peak"
        peak_out=$("$BUILD/tests/bench_peak") || status=1
        echo "$peak_out"
        f32=$(echo "$peak_out" | sed -n 's/^peak f32 gflops=\([0-9.]*\).*/\1/p')
        bf=$(echo "$peak_out" | sed -n 's/^peak bf16 gflops=\([0-9.]*\).*/\1/p')
        rd=$(echo "$peak_out" | sed -n 's/^peak read gbs=\([0-9.]*\).*/\1/p')
        [ -n "$f32" ] && PEAK_STEP="--peak-f32 $f32"
        [ -n "$bf" ] && PEAK_STEP="$PEAK_STEP --peak-bf16 $bf"
        [ -n "$rd" ] && PEAK_GEN="--read-gbs $rd"
    fi
    for b in "$BUILD"/tests/bench_*; do
        [ -x "$b" ] || continue
        case "$(basename "$b")" in
        bench_peak) ;;
        bench_gemm)
            echo "== bench_gemm"
            "$b" || status=1
            core=$("$EXE" -e 'io.write(xsa.blas().core)')
            best=$("$EXE" -e 'io.write(xsa.blas().best or "")')
            # only when the environment chose the kernel: unset, xsa's own
            # choice stands, and Zen (AVX2 Zen 3) is no weaker than Haswell
            # (not under ISA=: the wider kernel is what it leaves out)
            if [ -z "$ISA" ] && [ -n "${OPENBLAS_CORETYPE:-}" ] && [ -n "$best" ] && [ "$best" != "$core" ]; then
                echo "== OPENBLAS_CORETYPE=$best bench_gemm (the kernel this CPU supports; $core is in use)"
                OPENBLAS_CORETYPE=$best "$b" || status=1
            fi
            ;;
        bench_grid)
            # issue 38's grid: batch x seq_len, layers x width (heads of 64)
            echo "== bench_grid $PEAK_STEP (one process per shape)"
            for shape in "16 64 2 128" "4 256 2 128" "1 1024 2 128" "1 4096 2 128" "4 256 4 256" \
                "4 256 6 384" "1 1024 6 384" "1 2048 6 384" "1 4096 6 384"; do
                set -- $shape
                # shellcheck disable=SC2086
                "$b" --batch "$1" --seq "$2" --layers "$3" --width "$4" $PEAK_STEP || status=1
            done
            ;;
        bench_attention)
            echo "== bench_attention $PEAK_STEP"
            # shellcheck disable=SC2086
            "$b" $PEAK_STEP || status=1
            ;;
        bench_generate)
            echo "== bench_generate $PEAK_GEN"
            # shellcheck disable=SC2086
            "$b" $PEAK_GEN || status=1
            ;;
        bench_blocking)
            for p in $PRECISIONS; do
                for shape in "16 64" "8 256"; do
                    set -- $shape
                    echo "== bench_blocking --batch $1 --seq $2 --precision $p"
                    "$b" --batch "$1" --seq "$2" --precision "$p" || status=1
                done
            done
            ;;
        bench_step)
            for p in $PRECISIONS; do
                for shape in "16 64" "8 256"; do
                    set -- $shape
                    echo "== bench_step --batch $1 --seq $2 --precision $p $PEAK_STEP"
                    # shellcheck disable=SC2086
                    "$b" --batch "$1" --seq "$2" --precision "$p" $PEAK_STEP $TORCH || status=1
                done
            done
            ;;
        *)
            echo "== $(basename "$b")"
            "$b" || status=1
            ;;
        esac
    done
    # An attention written in Lua against the fused one (issue 36 step 5):
    # the same training step, its ratio printed
    echo "== tests/bench_attention_lua.lua (XSA written in Lua against attention = \"xsa\")"
    "$EXE" tests/bench_attention_lua.lua || status=1
    # The study's throughput (issue 38): part 3's pair trained as a part trains
    # it, beside the bench step in the same process; then two such runs at 1
    # thread side by side, the study's layout on 2 cores.
    echo "== bench_study (tests/bench_study.lua)"
    "$EXE" tests/bench_study.lua || status=1
    "$EXE" tests/bench_study.lua --side-by-side || status=1
    # The PyTorch reference of bench_generate (cached greedy decode).
    if [ -n "$TORCH" ]; then
        echo "== PyTorch reference: tests/reference/bench_generate_torch.py"
        /usr/bin/python3 tests/reference/bench_generate_torch.py "$("$EXE" -e 'io.write(xsa.blas().threads)')" || status=1
    fi
    return $status
}
# Everything above is also kept in a log, from which the summary takes the
# table doc/performance.md keeps per machine type and issue 22's targets:
# no figure of it is copied by hand.
LOG=$(mktemp) || exit 1
trap 'rm -f "$LOG" "$LOG.rc"' EXIT
{
    benches
    echo $? >"$LOG.rc"
} 2>&1 | tee "$LOG"
status=$(cat "$LOG.rc" 2>/dev/null || echo 1)
echo "== summary (tests/bench_summary.lua, from this run's lines above)"
"$EXE" tests/bench_summary.lua "$LOG" || status=1
exit "$status"
