#!/usr/bin/env bash
# One process per GPU, started by a launcher (mf_launch_detect, mf_ctx_join_launched): the
# mfact tool run by torchrun (and by Open MPI's mpirun where it is installed) on 2 GPUs
# must give what `--gpus 2` gives in one process: ALS's factors bit for bit (a group's ALS
# factors are one GPU's), one result printed (rank 0's), the factors written once, and
# the rendezvous file gone afterwards. Skips (77) without 2 GPUs or torchrun.
# usage: check-launched.sh MFACT
set -euo pipefail
mfact=$(realpath "$1")
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${n:-0}" -lt 2 ] || ! command -v torchrun >/dev/null; then
  echo "check-launched: needs 2 GPUs and torchrun (found ${n:-0} GPUs)"; exit 77
fi
export NCCL_NVLS_ENABLE=0 # never NVLink multicast on a shared host
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "check-launched: FAIL: $*"; exit 1; }

# Ratings with a planted rank-4 structure: 4,000 users x 600 items, about 120,000 ratings.
awk 'BEGIN { srand(7); for (u = 1; u <= 4000; u++) for (t = 0; t < 30; t++) {
  i = int(rand() * 600) + 1; if (seen[u "," i]++) continue
  v = 3 + sin(u * 0.37 + i * 0.11) + cos(u * 0.05 - i * 0.23); print u, i, v } }' > r.tsv

export MFACT_RENDEZVOUS=$tmp/rdv
als="als r.tsv --rank 16 --iterations 4 --test-fraction 0.1"
"$mfact" $als --gpus 2 --output-u g.u --output-v g.v > g.out
torchrun --standalone --nproc_per_node 2 --no-python "$mfact" $als --output-u t.u --output-v t.v \
  > t.out 2> t.err || { cat t.err; fail "als under torchrun"; }
cmp -s g.u t.u && cmp -s g.v t.v || fail "torchrun's ALS factors differ from --gpus 2's"
[ "$(grep -c 'test RMSE' t.out)" = "$(grep -c 'test RMSE' g.out)" ] ||
  fail "torchrun printed $(grep -c 'test RMSE' t.out) RMSE lines, --gpus 2 $(grep -c 'test RMSE' g.out)"
[ ! -e "$MFACT_RENDEZVOUS" ] || fail "the rendezvous file was left behind"
echo "als: torchrun's factors = --gpus 2's ($(tail -n 3 t.out | tr '\n' ' '))"

# --split-input: each rank reads every other rating, and the fit moves them to the ranks that
# solve their lines (NCCL send/recv); the mean is a sum over the ranks, so the factors are
# --gpus 2's to rounding (these ratings are not integers), and so is the test RMSE.
torchrun --standalone --nproc_per_node 2 --no-python "$mfact" $als --split-input \
  --output-u p.u --output-v p.v > p.out 2> p.err || { cat p.err; fail "als --split-input under torchrun"; }
python3 - g.u p.u g.v p.v g.out p.out <<'PY' || fail "als --split-input: not --gpus 2's fit"
import re, sys
def numbers(path):
    return [float(x) for line in open(path) for x in line.split()[1:]]
for a, b in ((sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4])):
    x, y = numbers(a), numbers(b)
    big = max(abs(v) for v in x)
    assert len(x) == len(y) and max(abs(u - v) for u, v in zip(x, y)) <= 1e-4 * big, (a, b)
rmse = lambda p: float(re.search(r"test RMSE ([0-9.]+)", open(p).read()).group(1))
assert abs(rmse(sys.argv[5]) - rmse(sys.argv[6])) <= 1e-4, (rmse(sys.argv[5]), rmse(sys.argv[6]))
PY
echo "als --split-input: torchrun's factors = --gpus 2's to rounding"

# The other collective commands: one JSON result, from rank 0.
for cmd in "sgd r.tsv --rank 16 --epochs 5 --test-fraction 0.1" \
           "ials r.tsv --rank 16 --iterations 3" \
           "complete r.tsv --rank 4 --max-iterations 20 --test-fraction 0.1"; do
  torchrun --standalone --nproc_per_node 2 --no-python "$mfact" $cmd --json > c.out 2> c.err ||
    { cat c.err; fail "$cmd under torchrun"; }
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' c.out ||
    { cat c.out; fail "$cmd: rank 0's output is not one JSON object"; }
  echo "${cmd%% *}: one JSON result under torchrun"
done

# sgd --split-input: each rank gathers its users' ratings from the others' parts. Hogwild on
# a GPU is not deterministic, so the fit is held to --gpus 2's test RMSE within 2%, after 30
# epochs: at 10 the RMSE still fell 7% an epoch, and runs of the same command spread by 2.3%
# (0.4269 to 0.4363 on 2 H200); at 30, 0.2587 to 0.2611 over 8 runs of both ways.
"$mfact" sgd r.tsv --rank 16 --epochs 30 --test-fraction 0.1 --gpus 2 > sg.out
torchrun --standalone --nproc_per_node 2 --no-python "$mfact" sgd r.tsv --rank 16 --epochs 30 \
  --test-fraction 0.1 --split-input > sp.out 2> sp.err || { cat sp.err; fail "sgd --split-input"; }
python3 - sg.out sp.out <<'PY' || fail "sgd --split-input: test RMSE not within 2% of --gpus 2's"
import re, sys
rmse = lambda p: float(re.search(r"test RMSE ([0-9.]+)", open(p).read()).group(1))
a, b = rmse(sys.argv[1]), rmse(sys.argv[2])
print(f"sgd --split-input: test RMSE {b:.4f} under torchrun, {a:.4f} with --gpus 2")
assert abs(a - b) <= 0.02 * a, (a, b)
PY

# A stale file is refused on rank 0, naming it.
echo stale > "$MFACT_RENDEZVOUS"
if torchrun --standalone --nproc_per_node 2 --no-python "$mfact" $als > s.out 2> s.err; then
  fail "a stale rendezvous file was taken"
fi
grep -q "exists" s.err || { cat s.err; fail "no word of the stale rendezvous file"; }
rm -f "$MFACT_RENDEZVOUS"
echo "stale rendezvous file: refused"

# Four processes where the host has four GPUs (issue 43: "the same fits run as 4 processes
# started by a launcher give the in-process group's results"): ALS, implicit ALS and
# complete are deterministic over a group, so each must equal --gpus 4's bit for bit.
if [ "$n" -ge 4 ]; then
  # complete --split-input: each process reads a quarter of the file; the shares are cut
  # from the lines summed over the ranks, so the engine gets what the whole input gives it.
  for fit in "als:u:v::$als" "ials:u:v::ials r.tsv --rank 16 --iterations 3" \
             "complete:x:y::complete r.tsv --rank 4 --max-iterations 20 --test-fraction 0.1" \
             "complete --split-input:x:y:--split-input:complete r.tsv --rank 4 --max-iterations 20"; do
    IFS=: read -r name a b split cmd <<<"$fit"
    "$mfact" $cmd --gpus 4 --output-$a g4.$a --output-$b g4.$b > g4.out 2> g4.err ||
      { cat g4.err; fail "$name --gpus 4"; }
    torchrun --standalone --nproc_per_node 4 --no-python "$mfact" $cmd $split --output-$a t4.$a \
      --output-$b t4.$b > t4.out 2> t4.err || { cat t4.err; fail "$name under torchrun, 4 processes"; }
    cmp -s g4.$a t4.$a && cmp -s g4.$b t4.$b ||
      fail "$name: 4 processes' factors differ from --gpus 4's"
    echo "$name: 4 processes under torchrun = --gpus 4, bit for bit"
  done
fi

if command -v mpirun >/dev/null; then
  mpirun --allow-run-as-root --oversubscribe -np 2 -x MFACT_RENDEZVOUS -x NCCL_NVLS_ENABLE \
    "$mfact" $als --output-u m.u --output-v m.v > m.out 2> m.err || { cat m.err; fail "als under mpirun"; }
  cmp -s g.u m.u && cmp -s g.v m.v || fail "mpirun's ALS factors differ from --gpus 2's"
  echo "als: mpirun's factors = --gpus 2's"
fi
echo "check-launched: ok"
