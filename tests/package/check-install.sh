#!/usr/bin/env bash
# Install the build tree into a scratch prefix, then build and run a small consumer against
# the *installed* files twice: with pkg-config, and with CMake's find_package(mfact).
set -euo pipefail
build=$1
consumer=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
libdir=$(dirname "$(find "$prefix" -name 'libmfact.so' | head -n 1)")
[ -f "$prefix/include/mfact/mfact.h" ] || { echo "header not installed"; exit 1; }
[ -n "$libdir" ] || { echo "library not installed"; exit 1; }

# 1. pkg-config
if command -v pkg-config >/dev/null; then
  export PKG_CONFIG_PATH=$libdir/pkgconfig
  flags=$(pkg-config --cflags --libs mfact)
  cc -std=c99 -Wall -Wextra -Werror "$consumer/consumer.c" $flags -o "$work/with-pkgconfig"
  LD_LIBRARY_PATH=$libdir "$work/with-pkgconfig" | tee "$work/out1"
  grep -q "consumer ok" "$work/out1"
  echo "pkg-config: $(pkg-config --modversion mfact), flags: $flags"
else
  echo "pkg-config not found: that half skipped"
fi

# 2. find_package(mfact)
cmake -S "$consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cfg.log" ||
  { cat "$work/cfg.log"; exit 1; }
cmake --build "$work/cmake-build" >"$work/build.log" || { cat "$work/build.log"; exit 1; }
LD_LIBRARY_PATH=$libdir "$work/cmake-build/consumer" | tee "$work/out2"
grep -q "consumer ok" "$work/out2"
echo "find_package: ok"
