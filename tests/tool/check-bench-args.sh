#!/usr/bin/env bash
# bench_sddmm refuses settings it cannot honour, before it touches a device: each bad argument
# exits 2 and names what it refused (a typo in --precisions once measured nothing and passed).
set -uo pipefail
bench=$1
fail() { echo "FAIL: $*"; exit 1; }
refuses() { # refuses WORD ARGS...: exit status 2, and WORD in the message
  local word=$1; shift
  local msg
  msg=$("$bench" "$@" 2>&1 >/dev/null)
  local rc=$?
  [ "$rc" -eq 2 ] || fail "bench_sddmm $* exited $rc, not 2: $msg"
  case $msg in *"$word"*) ;; *) fail "bench_sddmm $*: the message does not name '$word': $msg" ;; esac
  echo "refused: $* ($msg)"
}
refuses tf23 --precisions fp32,tf23
refuses "''" --precisions ''
refuses nyt --cases netflix,nyt
refuses "32,,128" --k 32,,128
refuses 12x --k 12x
refuses "0 is not" --k 32,0
refuses "got 0" --repeat 0
refuses "got -1" --scale -1
refuses "--shape" --cases none --shape bad,1
refuses usage --no-such-flag
# A good command line gets past the checks: on a machine without a GPU it stops at the
# context (status 1), on one with a GPU it would run, so only the refusals are asserted.
"$bench" --cases none --k 32 --repeat 1 --precisions fp32 >/dev/null 2>&1
rc=$?
[ "$rc" -ne 2 ] || fail "a good command line was refused"
echo "bench_sddmm's argument checks: ok"
