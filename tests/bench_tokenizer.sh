#!/bin/sh
# bench_tokenizer.sh: xsa's GPT-2 tokenizer against tiktoken (npm, WASM build of the Rust
# library) on the same TinyStories text and machine, one after the other:
#   1. encoding speed, single thread (tests/bench_bpe vs bench_tiktoken.mjs speed);
#   2. wall time of a whole "print the ids of a 2 MB file" run, start-up and vocabulary
#      loading included (scripts/tokenize.lua vs bench_tiktoken.mjs tokenize), and that
#      both print the same ids.
# Needs: a build (XSA_BUILD, default build) and `(cd tests && npm install)` for tiktoken.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
BUILD=${XSA_BUILD:-build}
EXE=${XSA_EXE:-$BUILD/xsa}
export XSA_ROOT="$ROOT"
if [ ! -d tests/node_modules/tiktoken ]; then
    echo "bench_tokenizer: tiktoken missing; run: (cd tests && npm install)"; exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
DATA=""
for d in "${XSA_DATA:-}" "$ROOT/data"; do
    [ -n "$d" ] || continue
    for n in tinystories.txt TinyStories-valid.txt; do
        if [ -f "$d/$n" ]; then DATA="$d/$n"; break 2; fi
    done
    # the committed corpus is compressed; tiktoken needs the plain text
    if [ -f "$d/tinystories.txt.xz" ]; then
        xz -dc "$d/tinystories.txt.xz" > "$tmp/tinystories.txt" && DATA="$tmp/tinystories.txt" && break
    fi
done
[ -n "$DATA" ] || { echo "bench_tokenizer: no TinyStories text in \$XSA_DATA or data/"; exit 1; }
head -c 2000000 "$DATA" > "$tmp/ts2m.txt"
# cut at the last newline so no code point is split
sed '$d' "$tmp/ts2m.txt" > "$tmp/ts2m_lines.txt"

echo "== encoding speed on $(basename "$DATA") ($(wc -c < "$DATA") bytes)"
"$BUILD/tests/bench_bpe"
node tests/fixtures/bench_tiktoken.mjs speed "$DATA"

wall() { # best wall time of 3 runs of "$@" > $out, in seconds
    best=""
    for i in 1 2 3; do
        s=$(date +%s.%N)
        "$@" > "$out"
        e=$(date +%s.%N)
        best=$(awk -v s="$s" -v e="$e" -v b="$best" 'BEGIN { t = e - s; if (b == "" || t < b) b = t; print b }')
    done
    printf '%.3f' "$best"
}
echo "== tokenize a $(wc -c < "$tmp/ts2m_lines.txt")-byte file, ids one per line (best of 3 wall times)"
out="$tmp/ours.ids"; ours=$(wall "$EXE" scripts/tokenize.lua "$tmp/ts2m_lines.txt")
out="$tmp/tiktoken.ids"; theirs=$(wall node tests/fixtures/bench_tiktoken.mjs tokenize "$tmp/ts2m_lines.txt")
echo "xsa scripts/tokenize.lua: ${ours} s"
echo "tiktoken (node):          ${theirs} s"
if cmp -s "$tmp/ours.ids" "$tmp/tiktoken.ids"; then
    echo "same ids: yes ($(wc -l < "$tmp/ours.ids") tokens)"
else
    echo "same ids: NO"; exit 1
fi
