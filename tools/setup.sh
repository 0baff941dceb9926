#!/usr/bin/env bash
# Installs what ddptok needs from Debian packages (only what is missing) and builds it.
#
#   tools/setup.sh [--builddir DIR] [--cuda auto|enabled|disabled] [--buildtype TYPE] [--no-build]
#
# Packages: a C compiler, meson, ninja, pkg-config, iniparser, Check, OpenBLAS, oneDNN
# (libdnnl-dev: the CPU backend's faster sgemm), jansson, OpenSSL (libcrypto), libedit,
# Open MPI (several processes under mpirun or srun), PCRE2 (GPT-2's pre-tokenization) and
# SentencePiece (its tokenizer and trainer, with a C++ compiler), and for figures python3
# with numpy and matplotlib. A new build directory gets meson's release build (-O3, no
# assertions) unless --buildtype says otherwise (debugoptimized keeps the assertions).
# The CUDA backend additionally needs the CUDA toolkit (nvcc, cuBLAS, NCCL), which is not
# a Debian package of this distribution: install it from the vendor; with --cuda auto
# (default) it is used when nvcc is found. Runs apt-get through sudo when not root.
set -euo pipefail

builddir=build
cuda=auto
build=1
buildtype=release
while [ $# -gt 0 ]; do
	case "$1" in
	--builddir) builddir=$2; shift 2 ;;
	--builddir=*) builddir=${1#*=}; shift ;;
	--cuda) cuda=$2; shift 2 ;;
	--cuda=*) cuda=${1#*=}; shift ;;
	--buildtype) buildtype=$2; shift 2 ;;
	--buildtype=*) buildtype=${1#*=}; shift ;;
	--no-build) build=0; shift ;;
	-h|--help) sed -n '2,14p' "$0"; exit 0 ;;
	*) echo "setup.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done
case "$cuda" in auto|enabled|disabled) ;; *) echo "setup.sh: --cuda takes auto, enabled or disabled" >&2; exit 2 ;; esac

cd "$(dirname "$0")/.."

packages=(gcc g++ meson ninja-build pkg-config libiniparser-dev check libopenblas-dev
	libdnnl-dev libjansson-dev libssl-dev libedit-dev libopenmpi-dev openmpi-bin libpcre2-dev
	libsentencepiece-dev python3 python3-numpy python3-matplotlib)
missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing ${missing[*]}"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
	echo "setup: all packages present"
fi

# the CUDA toolkit's usual location, when it is not on PATH yet
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
	export PATH="/usr/local/cuda/bin:$PATH"
fi

[ "$build" -eq 1 ] || exit 0
if [ -f "$builddir/build.ninja" ]; then
	meson configure "$builddir" -Dcuda="$cuda" -Dbuildtype="$buildtype" >/dev/null
else
	meson setup "$builddir" -Dcuda="$cuda" -Dbuildtype="$buildtype" >/dev/null
fi
ninja -C "$builddir" >/dev/null
echo "setup: built $builddir/ddptok-run (run it from $builddir: cd $builddir && ./ddptok-run configs/minimum.ini)"
