#!/usr/bin/env bash
# Compare the freshly built library's ABI with the committed baseline (abi/libmfact.abi).
# Fails when a function or variable is removed or changed; additions pass with a notice.
# Refresh the baseline on purpose with scripts/abi-baseline (docs/abi.md says when).
set -uo pipefail
lib=$1
src=$2
baseline=$src/abi/libmfact.abi
if ! command -v abidiff >/dev/null; then
  if [ "${MFACT_REQUIRE_ABI_CHECK:-0}" = 1 ]; then
    echo "abidiff not found (Debian: abigail-tools) and MFACT_REQUIRE_ABI_CHECK=1"; exit 1
  fi
  echo "abidiff not found: skipped"; exit 77
fi
[ -f "$baseline" ] || { echo "no baseline at $baseline (run scripts/abi-baseline)"; exit 1; }
report=$(abidiff --headers-dir2 "$src/include/mfact" "$baseline" "$lib" 2>&1)
rc=$?
echo "$report"
# abidiff's exit status is a bit field: 1 error, 2 usage error, 4 ABI change, 8 incompatible.
# Bit 8 is set only for removed symbols: a changed return type or parameter list sets 4
# alone. So: any removed or changed function or variable fails, and only additions pass.
if (( rc & 3 )); then echo "abidiff failed to run (status $rc)"; exit 1; fi
if (( rc & 12 )); then
  broken=$(grep -E '^(Functions|Variables) changes summary:' <<<"$report" |
           grep -Ev ': 0 Removed, 0 Changed' || true)
  if [ -n "$broken" ] || (( rc & 8 )); then
    echo "ABI CHANGE against the baseline: removed or changed functions or types."
    echo "If it is deliberate and compatible (a field appended to an option struct), or part of"
    echo "a new major version, refresh the baseline with scripts/abi-baseline (docs/abi.md)."
    exit 1
  fi
  echo "compatible ABI change (additions only): refresh the baseline with scripts/abi-baseline"
fi
echo "abi: compatible with the baseline"
