#!/usr/bin/env bash
# Compare the freshly built library's ABI with the committed baseline (abi/libmfact.abi).
# Fails on an incompatible change; a compatible one (new functions) passes with a notice.
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
abidiff --headers-dir2 "$src/include/mfact" "$baseline" "$lib" >/tmp/mfact-abidiff.$$ 2>&1
rc=$?
cat /tmp/mfact-abidiff.$$
rm -f /tmp/mfact-abidiff.$$
# abidiff's exit status is a bit field: 1 error, 2 usage error, 4 ABI change, 8 incompatible.
if (( rc & 3 )); then echo "abidiff failed to run (status $rc)"; exit 1; fi
if (( rc & 8 )); then echo "INCOMPATIBLE ABI CHANGE against the baseline"; exit 1; fi
if (( rc & 4 )); then
  echo "compatible ABI change (additions): refresh the baseline with scripts/abi-baseline"
fi
echo "abi: compatible with the baseline"
