#!/bin/sh
# Runs each libFuzzer harness built in $FUZZ_BUILD (one at a time) for
# $FUZZ_SECONDS seconds on a scratch copy of its seed corpus
# ($FUZZ_BUILD/corpus/NAME; seeds in tests/fuzz/corpus/NAME are copied in,
# never written to), then prints per harness its executions, coverage and
# whether it found anything. Exit status: non-zero on any finding (a crash,
# leak, timeout or out-of-memory input, saved under $FUZZ_BUILD/artifacts/NAME/).
# Usage: tests/fuzz/run.sh [NAME...]   (default: every harness)
# FUZZ_SEED (default 1) fixes libFuzzer's random seed, so a run is the same
# sequence of inputs each time (CI's 60 s are a prefix of a longer local run
# with the same seed); FUZZ_SEED=0 lets libFuzzer pick a new seed.
set -u
BUILD=${FUZZ_BUILD:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-60}
SEED=${FUZZ_SEED:-1}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1

names=${*:-$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c; done)}
found=0
summary=""
for name in $names; do
    bin=$BUILD/fuzz/$name
    [ -x "$bin" ] || { echo "fuzz: $bin is not built (make fuzz)" >&2; exit 1; }
    if [ "$name" = fuzz_bpe ] && [ ! -f "${XSA_DATA:-data}/encoder.json" ] && [ ! -f data/encoder.json ]; then
        summary="$summary
$name: SKIPPED (no encoder.json/vocab.bpe in \$XSA_DATA or data/; run make data or set XSA_DATA)"
        continue
    fi
    corpus=$BUILD/corpus/$name
    art=$BUILD/artifacts/$name
    log=$BUILD/logs/$name.log
    rm -rf "$art"   # artifacts of an earlier run are not findings of this one
    mkdir -p "$corpus" "$art" "$BUILD/logs"
    [ -d "tests/fuzz/corpus/$name" ] && cp tests/fuzz/corpus/"$name"/* "$corpus"/ 2>/dev/null
    echo "fuzz: $name for ${SECONDS_EACH}s (log $log)"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$bin" -max_total_time="$SECONDS_EACH" -seed="$SEED" -timeout=25 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$art/" "$corpus" >"$log" 2>&1
    status=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1 | sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+).*corp: ([0-9]+).*/cov \1, ft \2, corpus \3/')
    arts=$(ls "$art" 2>/dev/null | wc -l)
    if [ "$status" -ne 0 ] || [ "$arts" -ne 0 ]; then
        found=1
        result="FOUND (exit $status; $(ls "$art" | head -n 3 | tr '\n' ' ')in $art; see $log)"
    else
        result="nothing found"
    fi
    summary="$summary
$name: ${execs:-?} executions in ${SECONDS_EACH}s, ${cov:-no coverage line}: $result"
done
echo "fuzz summary:$summary"
exit $found
