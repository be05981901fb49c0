#!/usr/bin/env bash
# libmfact.so must export mf_ names alone (the version node mf_abi_0 included), and carry
# the SONAME of its major version.
set -euo pipefail
lib=$1
command -v nm >/dev/null || { echo "nm not found: skipped"; exit 77; }
others=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | grep -v '^mf_' || true)
if [ -n "$others" ]; then
  echo "exported symbols without the mf_ prefix:"; echo "$others"; exit 1
fi
count=$(nm -D --defined-only "$lib" | grep -c ' T mf_')
soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
case "$soname" in
  libmfact.so.[0-9]*) ;;
  *) echo "SONAME '$soname' does not carry the major version"; exit 1 ;;
esac
echo "exports: $count mf_ functions, nothing else; SONAME $soname"
