#!/bin/sh
# fetch.sh: gets the data xsa needs into this folder (data/):
#   TinyStories-valid.txt  the TinyStories validation split, from the dataset's public home
#                          (huggingface.co/datasets/roneneldan/TinyStories)
#   encoder.json, vocab.bpe  GPT-2's BPE files, from OpenAI's public bucket (the URLs and
#                          sha256 values tiktoken pins)
#
#   sh data/fetch.sh               make sure data/ holds verified copies (downloads what is
#                                  missing or does not verify)
#   sh data/fetch.sh --if-missing  exit 0 at once, without network, when every file is
#                                  already found where xsa looks: $XSA_DATA, <root>/data,
#                                  ./data
#
# Nothing on the path of `make run` or `make test` calls this: the checkout ships the
# GPT-2 files and the study's corpus (tinystories.txt.xz, found before the official
# TinyStories-valid.txt). This is for users who want the official validation split. Downloads go to NAME.part and are renamed only after their size/checksum check.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=${XSA_ROOT:-$(dirname "$HERE")}

TS_URL=https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main/TinyStories-valid.txt
ENC_URL=https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json
BPE_URL=https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe
ENC_SHA=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
BPE_SHA=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
ENC_SIZE=1042301
BPE_SIZE=456318
# The validation split's checksum is not pinned here; the file is checked for a
# plausible size and for the story separator instead.
TS_MIN_SIZE=10000000

say() { echo "fetch.sh: $*"; }
die() { echo "fetch.sh: $*" >&2; exit 1; }

search_dirs() {
    [ -n "${XSA_DATA:-}" ] && echo "$XSA_DATA"
    echo "$ROOT/data"
    echo "data"
}

# find NAME...: prints the first existing DIR/NAME
find_file() {
    for d in $(search_dirs); do
        for n in "$@"; do
            if [ -f "$d/$n" ]; then echo "$d/$n"; return 0; fi
        done
    done
    return 1
}

if [ "${1:-}" = "--if-missing" ]; then
    ts=$(find_file tinystories.txt tinystories.txt.xz TinyStories-valid.txt) &&
    enc=$(find_file encoder.json) && bpe=$(find_file vocab.bpe) && {
        say "data found: $ts, $enc, $bpe"
        exit 0
    }
elif [ $# -gt 0 ]; then
    die "usage: sh data/fetch.sh [--if-missing]"
fi

sha256() {
    if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
    elif command -v shasum >/dev/null 2>&1; then shasum -a 256 "$1" | cut -d' ' -f1
    else echo unknown; fi
}

size_of() { wc -c < "$1" | tr -d ' '; }

# verify FILE SIZE SHA: 0 when it matches
verify() {
    [ -f "$1" ] || return 1
    [ "$(size_of "$1")" = "$2" ] || return 1
    s=$(sha256 "$1")
    [ "$s" = unknown ] && return 0
    [ "$s" = "$3" ]
}

verify_text() {
    [ -f "$1" ] || return 1
    [ "$(size_of "$1")" -ge "$TS_MIN_SIZE" ] || return 1
    grep -q '^<|endoftext|>' "$1"
}

command -v curl >/dev/null 2>&1 || die "curl is not installed. Install it, or put tinystories.txt (or TinyStories-valid.txt), encoder.json and vocab.bpe into $HERE or a folder named by XSA_DATA."

# get NAME URL CHECK...: downloads into $HERE/NAME unless it already verifies
get() {
    name=$1; url=$2; shift 2
    dest="$HERE/$name"
    if "$@" "$dest"; then say "$name: present and verified"; return 0; fi
    say "downloading $url"
    rm -f "$dest.part"
    if ! curl -fL --retry 3 --connect-timeout 20 -o "$dest.part" "$url"; then
        rm -f "$dest.part"
        die "could not download $url. Download it by hand into $HERE, or set XSA_DATA to a folder that holds tinystories.txt (or TinyStories-valid.txt), encoder.json and vocab.bpe."
    fi
    if ! "$@" "$dest.part"; then
        rm -f "$dest.part"
        die "$url: the download does not have the expected size/checksum; not used."
    fi
    mv "$dest.part" "$dest"
    say "$name: ok ($(size_of "$dest") bytes)"
}

verify_enc() { verify "$1" "$ENC_SIZE" "$ENC_SHA"; }
verify_bpe() { verify "$1" "$BPE_SIZE" "$BPE_SHA"; }

get encoder.json "$ENC_URL" verify_enc
get vocab.bpe "$BPE_URL" verify_bpe
if [ -f "$HERE/tinystories.txt" ]; then
    say "tinystories.txt: present"
else
    get TinyStories-valid.txt "$TS_URL" verify_text
fi
exit 0
