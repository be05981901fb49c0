#!/usr/bin/env bash
# The benchmarks refuse settings they cannot honour, before they touch a device: each bad
# argument exits 2 and names what it refused (a typo in bench_sddmm's --precisions once
# measured nothing and passed; atoi read "12x" as 12 and a missing value as 0). $1: the
# directory of the bench binaries. bench_sddmm must be there; another bench that was not
# built (bench_als needs cuSOLVER) is skipped.
set -uo pipefail
dir=$1
fail() { echo "FAIL: $*"; exit 1; }
bench=
refuses() { # refuses WORD ARGS...: $bench ARGS exits with status 2, and WORD is in the message
  local word=$1; shift
  local msg
  msg=$("$dir/$bench" "$@" 2>&1 >/dev/null)
  local rc=$?
  [ "$rc" -eq 2 ] || fail "$bench $* exited $rc, not 2: $msg"
  case $msg in *"$word"*) ;; *) fail "$bench $*: the message does not name '$word': $msg" ;; esac
  echo "refused: $bench $* ($msg)"
}
built() { # built NAME: NAME becomes $bench; false (and a line) when it was not built
  bench=$1
  [ -x "$dir/$bench" ] && return 0
  echo "skipped: $bench (not built)"
  return 1
}

built bench_sddmm || fail "no bench_sddmm in $dir"
refuses tf23 --precisions fp32,tf23
refuses "''" --precisions ''
refuses nyt --cases netflix,nyt
refuses "32,,128" --k 32,,128
refuses 12x --k 12x
refuses "0 in '32,0'" --k 32,0
refuses "'0'" --repeat 0
refuses "'5x'" --repeat 5x
refuses "'-1'" --scale -1
refuses "'0.5.'" --beta 0.5.
refuses "'-1'" --seed -1
refuses "--shape" --cases none --shape bad,1
refuses usage --no-such-flag
# A good command line gets past the checks: on a machine without a GPU it stops at the
# context (status 1), on one with a GPU it would run, so only the refusals are asserted.
"$dir/$bench" --cases none --k 32 --repeat 1 --precisions fp32 >/dev/null 2>&1
rc=$?
[ "$rc" -ne 2 ] || fail "a good command line was refused"

# The other benches' good command lines would run whole benchmarks on a GPU: refusals only
# (bench_bmf's --write below excepted, which runs on the CPU).
if built bench_als; then
  refuses "'12x'" --iterations 12x
  refuses "''" --iterations
  refuses "0 in '32,0'" --k 32,0
  refuses "'0'" --repeat 0
  refuses "'unif'" --init mean,unif
  refuses "'-1'" --lambda -1
  refuses "'cgx'" --solver cgx
  refuses "'65'" --cg-steps 65
  refuses "'fp8'" --monitor fp32,fp8
  refuses "'0'" --scale 0
  refuses "'-1'" --seed -1
  refuses "--train and --test" --train ratings.bin
  refuses nosuch --case nosuch
  refuses usage --no-such-flag
fi
if built bench_als_gpus; then
  refuses "0 in '1,0'" --gpus 1,0
  refuses "0 in '0'" --k 0
  refuses "'2.5'" --iterations 2.5
  refuses "'0'" --repeat 0
  refuses "'foo'" --solver foo
  refuses "'shard'" --layout shard
  refuses "'12x'" --seed 12x
  refuses "exclude each other" --sgd --ials
  refuses "--train and --test" --test ratings.bin
  refuses nosuch --launched --case nosuch
  refuses usage --no-such-flag
fi
if built bench_asd; then
  refuses "'100,100,10,0.5x'" --case 100,100,10,0.5x
  refuses "'100,100,200,0.5'" --case 100,100,200,0.5
  refuses "'100,100,10,0.5,0.5'" --case 100,100,10,0.5,0.5
  refuses "'0'" --tol 0
  refuses "'abc'" --timed abc
  refuses "'0'" --runs 0
  refuses "'-1'" --stagnation -1
  refuses "'-1'" --memory-limit-gb -1
  refuses "'tf32'" --precision fp32,tf32
  refuses usage --no-such-flag
fi
if built bench_bmf; then
  refuses "'4x'" --instances 4x
  refuses shop --case shop
  refuses "'rows=12x'" --case basket,rows=12x
  refuses "'bundle-p=2'" --case basket,bundle-p=2
  refuses "'foo'" --case basket,foo=1
  refuses "'1000,1000,10x'" --scale 1000,1000,10x
  refuses "'1000,1000,100,8,0,1.5,2'" --scale 1000,1000,100,8,0,1.5,2
  refuses usage --no-such-flag
  # --write generates the cases on the CPU and runs nothing: a good command line, whole.
  tmp=$(mktemp -d) || fail "mktemp"
  "$dir/$bench" --write "$tmp" --case basket,rows=200,cols=100,ones=1e3,seed=7 >/dev/null 2>&1
  rc=$?
  made=0
  [ -s "$tmp/basket-7.pairs" ] && made=1
  rm -rf "$tmp"
  if [ "$rc" -ne 0 ] || [ "$made" -ne 1 ]; then
    fail "bench_bmf --write: status $rc, file made: $made"
  fi
fi
if built bench_ials; then
  refuses "-1 in '64,-1'" --k 64,-1
  refuses "'0'" --cg-steps 0
  refuses "'-1'" --alpha -1
  refuses "'0'" --top 0
  refuses "'-1'" --device-limit -1
  refuses "'1.5'" --seed 1.5
  refuses zzz --case zzz
  refuses usage --no-such-flag
fi
if built bench_sgd; then
  refuses "'0'" --epochs 0
  refuses "'0'" --lr 0
  refuses "'0'" --repeat 0
  refuses "16 in '0,16'" --lanes 0,16
  refuses "-2 in '-2'" --replicas -2
  refuses "2 in '2'" --local-bias 2
  refuses "exclude each other" --fp32-only --fp16-only
  refuses "--train and --test" --train ratings.bin
  refuses "'bogus'" --case netflix,bogus=1
  refuses usage --no-such-flag
fi
echo "the benches' argument checks: ok"
