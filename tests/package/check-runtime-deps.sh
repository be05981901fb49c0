#!/usr/bin/env bash
# libmfact.so needs no CUDA toolkit library at run time (cuSPARSE is loaded on first use by
# mf_spmm on the GPU, the CUDA runtime is static): its NEEDED entries name none, and a
# program linking it loads and makes a CPU context with the dynamic linker's cache (where
# the toolkit's libraries are found) turned off. Prints the library's size.
set -euo pipefail
lib=$1 prog=$2
command -v readelf >/dev/null || { echo "readelf not found: skipped"; exit 77; }
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
toolkit=$(echo "$needed" | grep -E '^lib(cu|nv|cublas|cusparse|cusolver|curand|cufft|nccl)' || true)
if [ -n "$toolkit" ]; then
  echo "libmfact.so needs CUDA toolkit libraries:"; echo "$toolkit"; exit 1
fi
ldso=$(readelf -l "$prog" | sed -n 's/.*interpreter: \(.*\)\]/\1/p')
[ -x "$ldso" ] || { echo "no dynamic linker at '$ldso': skipped"; exit 77; }
out=$("$ldso" --inhibit-cache --library-path "$(dirname "$lib")" "$prog" info --backend cpu) ||
  { echo "the program did not run without the linker cache:"; echo "$out"; exit 1; }
# a here-string, not a pipe: under pipefail, grep -q quitting at its match can kill the echo
# still writing with SIGPIPE and fail the check (seen once in scripts/test on 2 cores)
grep -q '^backend cpu$' <<<"$out" || { echo "no CPU context: $out"; exit 1; }
size=$(stat -L -c %s "$lib")
echo "runtime deps: $(echo $needed); no CUDA toolkit library; $((size / 1024)) KiB"
