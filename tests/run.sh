#!/bin/sh
# Runs every C test binary ($XSA_BUILD/tests/test_*) and every Lua test
# (tests/test_*.lua, through $XSA_EXE), adds up their "NAME: N passed, M
# failed" lines and ends with the total. A program that dies before its
# summary counts as one failure. Exit status: non-zero on any failure.
#   sh tests/run.sh                 every test (make test)
#   sh tests/run.sh tensor stats    only those: test_tensor (C) and
#                                   test_tensor.lua, test_stats.lua (make test T="tensor stats");
#                                   a name matching no test is an error
set -u
BUILD=${XSA_BUILD:-build}
EXE=${XSA_EXE:-$BUILD/xsa}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
export XSA_ROOT="$ROOT"
# runs made by tests record into a scratch folder, never the checkout's results/
XSA_RESULTS=$(mktemp -d)
export XSA_RESULTS
export LUA_PATH="$ROOT/tests/lib/?.lua;$ROOT/lua/?.lua;;"
out=$(mktemp)
trap 'rm -rf "$out" "$XSA_RESULTS"' EXIT
total_pass=0
total_fail=0
# the names asked for, as test_NAME (a given "test_x.lua" or "tests/test_x" is the name x)
ONLY=""
for n in "$@"; do
    n=$(basename "$n"); n=${n%.lua}; n=${n#test_}
    if [ ! -e "$BUILD/tests/test_$n" ] && [ ! -f "tests/test_$n.lua" ]; then
        echo "tests/run.sh: no test named '$n' (tests/test_$n.lua or $BUILD/tests/test_$n)" >&2
        exit 2
    fi
    ONLY="$ONLY test_$n "
done
wanted() { [ -z "$ONLY" ] || case "$ONLY" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

run_one() {
    name=$1; shift
    start=$(date +%s)
    "$@" >"$out" 2>&1
    status=$?
    cat "$out"
    line=$(grep -E '^[^ ]+: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
    if [ -n "$line" ]; then
        p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
        f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    else
        p=0; f=0
    fi
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $name exited with status $status"
        f=1
    fi
    echo "   ($name: $(( $(date +%s) - start ))s)"
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
}

for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    wanted "$(basename "$t")" || continue
    run_one "$(basename "$t")" "$t"
done
# the kernel tests again, built for the narrower SIMD paths (make test)
for b in ${XSA_ISA_BUILDS:-}; do
    for n in ${XSA_ISA_TESTS:-}; do
        wanted "$n" || continue
        [ -x "$b/tests/$n" ] && run_one "$n [$b]" "$b/tests/$n"
    done
done
for t in tests/test_*.lua; do
    [ -f "$t" ] || continue
    wanted "$(basename "$t" .lua)" || continue
    run_one "$(basename "$t")" "$EXE" "$t"
done
# The module must also load in a stock lua5.4 (not in sanitizer builds,
# whose runtime must come first in the process).
if [ -z "$ONLY" ] && [ -z "${XSA_SANITIZED:-}" ] && [ -f tests/stock_lua.lua ] && command -v lua5.4 >/dev/null 2>&1; then
    run_one stock_lua.lua env LUA_CPATH="$ROOT/$BUILD/?.so;;" lua5.4 tests/stock_lua.lua
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
