#!/usr/bin/env bash
# Test and bench hooks (src/<algo>/<algo>_hooks.cu) live in the internal archive that the
# suites and benches link, never in the shipped library: neither its dynamic symbols (nm -D)
# nor its full symbol table (nm) names one. So that the check cannot pass by looking for
# the wrong names, each name must be found in the archive of a CUDA build.
set -euo pipefail
lib=$1 archive=$2 cuda=$3
command -v nm >/dev/null || { echo "nm not found: skipped"; exit 77; }
hooks='mf_cuda_als_solve_dense|mf_cuda_als_bench_|als_expand_kernel|mf_cuda_sddmm_variant|mf_bmf_set_debug_recount|debug_recount'
status=0
for table in "nm -D" "nm"; do
  found=$($table "$lib" 2>/dev/null | grep -E "$hooks" || true)
  if [ -n "$found" ]; then
    echo "$table $(basename "$lib") names hooks:"; echo "$found"; status=1
  fi
done
if [ "$cuda" = 1 ]; then
  syms=$(nm -C "$archive" 2>/dev/null) # whole, before grep: grep -q would cut the pipe short
  for name in mf_cuda_als_solve_dense mf_cuda_als_bench_begin als_expand_kernel \
              mf_cuda_sddmm_variant; do
    grep -q "T .*$name" <<<"$syms" ||
      { echo "$name is not in $(basename "$archive"): the hook list is stale"; status=1; }
  done
fi
[ $status -eq 0 ] && echo "no hooks in $(basename "$lib")"
exit $status
