#!/bin/sh
# Makes sure the system packages xsa builds and runs with are installed.
# Installs the missing ones with apt-get when it can (root, or sudo without a
# password); otherwise prints the one apt-get line to run and fails.
#
#   sh mk/deps.sh                 install what is missing (the `make deps` target)
#   sh mk/deps.sh --fuzz          the same plus clang and libFuzzer for `make fuzz`
#   sh mk/deps.sh --bf16          the same plus oneDNN (the opt-in bf16 products)
#   sh mk/deps.sh --mpi           the same plus Open MPI (xsa.mpi, mpirun)
#   sh mk/deps.sh --jupyter       the same plus the Jupyter kernel's libraries and Jupyter
#   sh mk/deps.sh --all           every optional group above (what CI installs)
#   sh mk/deps.sh --list-missing  print the missing package names and exit 0
# Groups combine (--fuzz --mpi); --list-missing comes last.
#
# This is the one list of packages: .ci/run and the Makefile both come here.
# Optional packages, each found at build time, are installed only when asked:
#   clang libfuzzer-14-dev libclang-rt-14-dev   `make fuzz` (--fuzz)
#   libdnnl-dev              bf16 matrix products through oneDNN (--bf16)
#   libopenmpi-dev openmpi-bin   runs under mpirun (--mpi)
#   libzmq3-dev libssl-dev   the Jupyter kernel (xsa --kernel): ZeroMQ, OpenSSL's HMAC
#   jupyter-nbconvert python3-jupyter-client python3-zmq jupyter-client
#                            running notebooks and the kernel's tests (--jupyter);
#                            jupyter-client has the `jupyter kernelspec` command
#                            (python3-jupyter-client is only its library)
#   python3-torch            the PyTorch reference scripts in tests/reference
#   libdnnl-dev              oneDNN: the opt-in bf16 matrix products (precision "bf16");
#                            the Makefile finds its header, and builds without it
set -u
PACKAGES="gcc make pkg-config liblua5.4-dev lua5.4 libopenblas-dev libutf8proc-dev libcjson-dev libedit-dev liblzma-dev gnuplot-nox luarocks"
FUZZ_PACKAGES="clang libfuzzer-14-dev libclang-rt-14-dev"
BF16_PACKAGES="libdnnl-dev"
MPI_PACKAGES="libopenmpi-dev openmpi-bin"
JUPYTER_PACKAGES="libzmq3-dev libssl-dev jupyter-nbconvert python3-jupyter-client python3-zmq jupyter-client"
while [ $# -gt 0 ]; do
    case "$1" in
        --fuzz) PACKAGES="$PACKAGES $FUZZ_PACKAGES" ;;
        --bf16) PACKAGES="$PACKAGES $BF16_PACKAGES" ;;
        --mpi) PACKAGES="$PACKAGES $MPI_PACKAGES" ;;
        --jupyter) PACKAGES="$PACKAGES $JUPYTER_PACKAGES" ;;
        --all) PACKAGES="$PACKAGES $FUZZ_PACKAGES $BF16_PACKAGES $MPI_PACKAGES $JUPYTER_PACKAGES" ;;
        --list-missing) break ;;
        *) echo "mk/deps.sh: unknown option $1 (--fuzz, --bf16, --mpi, --jupyter, --all, --list-missing)" >&2; exit 2 ;;
    esac
    shift
done

missing_packages() {
    if ! command -v dpkg-query >/dev/null 2>&1; then
        # Not Debian: name the libraries pkg-config cannot find.
        for p in lua5.4 openblas libutf8proc libcjson libedit liblzma; do
            pkg-config --exists "$p" 2>/dev/null || printf ' %s' "$p"
        done
        return
    fi
    for p in $PACKAGES; do
        status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
        case "$status" in
            ii*) ;;
            *) printf ' %s' "$p" ;;
        esac
    done
}

missing=$(missing_packages)
if [ "${1:-}" = "--list-missing" ]; then
    echo "${missing# }"
    exit 0
fi
[ -z "$missing" ] && exit 0

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "xsa: missing libraries:$missing; install the development packages of Lua 5.4, OpenBLAS, utf8proc, cJSON, libedit and liblzma" >&2
    exit 1
fi

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
