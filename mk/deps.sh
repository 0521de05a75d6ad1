#!/bin/sh
# Makes sure the system packages xsa builds and runs with are installed.
# Installs the missing ones with apt-get when it can (root, or sudo without a
# password); otherwise prints the one apt-get line to run and fails.
set -u
# Optional, for `make fuzz` only (never installed here; make fuzz names them
# when missing): clang libfuzzer-14-dev libclang-rt-14-dev
PACKAGES="gcc make pkg-config liblua5.4-dev lua5.4 libopenblas-dev libutf8proc-dev libcjson-dev libedit-dev gnuplot-nox curl ca-certificates"

if ! command -v dpkg-query >/dev/null 2>&1; then
    # Not Debian: trust pkg-config alone.
    if pkg-config --exists lua5.4 openblas libutf8proc libcjson libedit 2>/dev/null; then exit 0; fi
    echo "xsa: missing libraries; install Lua 5.4, OpenBLAS, utf8proc, cJSON and libedit development packages" >&2
    exit 1
fi

missing=""
for p in $PACKAGES; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
    case "$status" in
        ii*) ;;
        *) missing="$missing $p" ;;
    esac
done
[ -z "$missing" ] && exit 0

echo "xsa: installing missing packages:$missing" >&2
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "xsa: cannot install packages (not root, no passwordless sudo). Run:" >&2
    echo "    sudo apt-get install -y$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends $missing; } >&2; then
    echo "xsa: apt-get failed. Run by hand:" >&2
    echo "    sudo apt-get install -y$missing" >&2
    exit 1
fi
