#!/usr/bin/env bash
# The command-line tool: subcommands, common flags, labelled and JSON output, exit codes.
set -uo pipefail
# grep for a pattern in a pipe: reads its whole input, where grep -q quits at the first match
# and, under pipefail, can fail the pipeline by killing a writer still writing (SIGPIPE)
has() { grep "$@" >/dev/null; }
mfact=$1
fail() { echo "FAIL: $*"; exit 1; }
out=$("$mfact" info) || fail "mfact info exited $?"
echo "$out" | has "^version " || fail "info has no version line: $out"
echo "$out" | has "^backend " || fail "info has no backend line"

# demo on generated data: every step at a fifth of the CPU size, what each gets against the
# planted truth, the "==" lines saying what runs, and the same data from the same seed
json=$("$mfact" demo --backend cpu --scale 0.2 --seed 3 --json 2>/tmp/mfact-cli-err.$$) ||
  fail "demo exited $?: $(cat /tmp/mfact-cli-err.$$)"
echo "$json"
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
p = d["planted_test_RMSE"]
assert 0.45 < p < 0.55, ("planted RMSE is not the noise", d)
for m in ("ALS", "SGD"):
    assert d[m + "_test_RMSE"] < 1.15 * p, (m + " test RMSE more than 15% above the planted", d)
assert d["BMF_F1_vs_planted"] > 0.9, ("BMF F1", d)
assert d["SDDMM_k32_ms"] > 0 and d["SDDMM_k32_GFLOP/s"] > 0, ("SDDMM", d)
assert d["ASD_relative_error_vs_planted"] < 1e-3, ("completion", d)
assert d["test_ratings"] > 0.05 * d["train_ratings"], d
' || fail "demo results: $json"
for step in "ALS-WR" "Hogwild SGD" "SDDMM" "BMF" "matrix completion"; do
  grep -q "^== $step" /tmp/mfact-cli-err.$$ || fail "demo does not say it runs $step: $(cat /tmp/mfact-cli-err.$$)"
done
als() { "$mfact" demo --backend cpu --scale 0.1 --steps als "$@" 2>/dev/null | grep -E '^(train ratings|ALS test RMSE) '; }
one=$(als --seed 7) || fail "demo --steps als exited $?"
[ "$one" = "$(als --seed 7)" ] || fail "same seed, different ALS result: $one"
[ "$one" != "$(als --seed 8)" ] || fail "another seed, the same ALS result: $one"
out=$("$mfact" demo --backend cpu --shape 2000,1500,0.01 --steps sddmm) || fail "demo --shape exited $?"
echo "$out" | has "^users 2000$" && echo "$out" | has "^items 1500$" || fail "demo --shape: $out"
echo "$out" | has "^ALS" && fail "demo --steps sddmm ran ALS: $out"
n=$(echo "$out" | awk '/^(train|test) ratings /{s += $3} END {print s}')
[ "$n" -ge 29000 ] && [ "$n" -le 30000 ] || fail "demo --shape 2000,1500,0.01 made $n ratings, not about 30000"
# a matrix too large for memory says so (the generator's failure once read "no error")
"$mfact" demo --backend cpu --shape 1000000000,1000000000,0.5 >/dev/null 2>/tmp/mfact-cli-err.$$
[ $? -eq 1 ] || fail "huge demo --shape did not fail with 1"
grep -q "no error" /tmp/mfact-cli-err.$$ && fail "huge demo --shape: $(cat /tmp/mfact-cli-err.$$)"
grep -q "host memory" /tmp/mfact-cli-err.$$ || fail "huge demo --shape message: $(cat /tmp/mfact-cli-err.$$)"
"$mfact" demo --steps als,nope 2>/dev/null; [ $? -eq 2 ] || fail "demo --steps nope is not a usage error"
"$mfact" demo --scale 0 2>/dev/null; [ $? -eq 2 ] || fail "demo --scale 0 is not a usage error"

tmp=$(mktemp --suffix=.mtx)
trap 'rm -f "$tmp"' EXIT
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 2.5\n3 2 -1\n' >"$tmp"
out=$("$mfact" demo --backend cpu "$tmp") || fail "demo FILE exited $?"
echo "$out" | has "^nnz 2$" || fail "demo FILE nnz: $out"
grep -q "^rows 3$" <<<"$out" && grep -q "^mean value 0.75$" <<<"$out" || fail "demo FILE report: $out"
json=$("$mfact" demo --backend cpu "$tmp" --json) || fail "demo FILE --json exited $?"
echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["rows"]==3 and d["cols"]==3, d' ||
  fail "demo FILE --json is not the expected JSON: $json"
"$mfact" demo --backend cpu "$tmp" --steps als 2>/dev/null; [ $? -eq 2 ] || fail "demo FILE --steps is not a usage error"

"$mfact" demo --backend cpu /nonexistent.mtx 2>/tmp/mfact-cli-err.$$ && fail "missing file accepted"
grep -q "cannot open" /tmp/mfact-cli-err.$$ || fail "missing file message: $(cat /tmp/mfact-cli-err.$$)"
"$mfact" demo --bogus 2>/dev/null && fail "unknown flag accepted"
"$mfact" demo --backend quantum 2>/dev/null && fail "bad backend accepted"
"$mfact" frobnicate 2>/dev/null && fail "unknown subcommand accepted"
"$mfact" --help | has "^  complete " || fail "mfact --help does not list complete"
"$mfact" demo --help | has -- "--backend" || fail "demo --help lacks the common flags"

# sddmm: a timed run on a generated pattern and on the file, JSON, and bad values
out=$("$mfact" sddmm --backend cpu --shape 500,400,0.01 --k 7 --repeat 2) || fail "sddmm exited $?"
echo "$out" | has "^k 7$" || fail "sddmm k: $out"
echo "$out" | grep -Eq "^median seconds [0-9.e-]+$" || fail "sddmm median: $out"
json=$("$mfact" sddmm --backend cpu "$tmp" --k 3 --json) || fail "sddmm FILE exited $?"
echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["nnz"]==2 and d["k"]==3, d' ||
  fail "sddmm --json: $json"
"$mfact" sddmm --k 0 2>/dev/null; [ $? -eq 2 ] || fail "sddmm --k 0 is not a usage error"
"$mfact" sddmm --repeat -1 2>/dev/null; [ $? -eq 2 ] || fail "sddmm --repeat -1 is not a usage error"
"$mfact" sddmm --help | has -- "--repeat" || fail "sddmm --help"

# als: a factorization with a held-out fraction, factors written, JSON, and bad values
ratings=$(mktemp --suffix=.txt)
fu=$(mktemp) fv=$(mktemp)
trap 'rm -f "$tmp" "$ratings" "$fu" "$fv"' EXIT
for u in $(seq 0 39); do for i in $(seq 0 29); do
  [ $(( (u * 7 + i * 13) % 5 )) -lt 2 ] && echo "$u $i $(( (u + i) % 5 + 1 ))"
done; done >"$ratings"
out=$("$mfact" als --backend cpu "$ratings" --rank 3 --iterations 4 --test-fraction 0.2 \
      --output-u "$fu" --output-v "$fv" 2>/tmp/mfact-cli-err.$$) || fail "als exited $?"
echo "$out" | has "^rank 3$" || fail "als rank: $out"
echo "$out" | grep -Eq "^test RMSE [0-9.]+$" || fail "als test RMSE: $out"
grep -q "^iteration 4: train RMSE" /tmp/mfact-cli-err.$$ || fail "als progress: $(cat /tmp/mfact-cli-err.$$)"
[ "$(wc -l <"$fu")" -eq 40 ] && [ "$(wc -l <"$fv")" -eq 30 ] || fail "als factor files"
[ "$(head -1 "$fu" | wc -w)" -eq 3 ] || fail "als factor rows"
json=$("$mfact" als --backend cpu "$ratings" --rank 2 --iterations 2 --json 2>/dev/null) || fail "als --json exited $?"
echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["rank"]==2 and d["iterations"]==2 and d["train_RMSE"]<2, d' ||
  fail "als --json: $json"
"$mfact" als "$ratings" --rank 0 2>/dev/null; [ $? -eq 2 ] || fail "als --rank 0 is not a usage error"
"$mfact" als "$ratings" --lambda -1 2>/dev/null; [ $? -eq 2 ] || fail "als --lambda -1 is not a usage error"
"$mfact" als "$ratings" --test "$tmp" --test-fraction 0.1 2>/dev/null; [ $? -eq 2 ] || fail "als --test with --test-fraction"
"$mfact" als 2>/dev/null; [ $? -eq 2 ] || fail "als without FILE"
"$mfact" als "$ratings" --gpus 0 2>/dev/null; [ $? -eq 2 ] || fail "als --gpus 0 is not a usage error"
err=$("$mfact" als --backend cpu "$ratings" --gpus 2 2>&1 >/dev/null); [ $? -ne 0 ] || fail "als --gpus 2 on the CPU succeeded"
echo "$err" | has "needs the CUDA backend" || fail "als --gpus on the CPU: $err"
for cmd in sgd ials complete; do
  "$mfact" $cmd "$ratings" --gpus 0 2>/dev/null; [ $? -eq 2 ] || fail "$cmd --gpus 0 is not a usage error"
  err=$("$mfact" $cmd --backend cpu "$ratings" --gpus 2 2>&1 >/dev/null); [ $? -ne 0 ] || fail "$cmd --gpus 2 on the CPU succeeded"
  echo "$err" | has "needs the CUDA backend" || fail "$cmd --gpus on the CPU: $err"
done
"$mfact" als --help | has -- "--test-fraction" || fail "als --help"

# sgd: the same, with fp16 factors, and its bad values
out=$("$mfact" sgd --backend cpu "$ratings" --rank 3 --epochs 4 --test-fraction 0.2 --fp16 \
      --output-u "$fu" --output-v "$fv" 2>/tmp/mfact-cli-err.$$) || fail "sgd exited $?"
echo "$out" | has "^storage fp16$" || fail "sgd storage: $out"
echo "$out" | grep -Eq "^test RMSE [0-9.]+$" || fail "sgd test RMSE: $out"
echo "$out" | grep -Eq "^updates per second [0-9.e+]+$" || fail "sgd updates per second: $out"
grep -q "^epoch 4: train RMSE" /tmp/mfact-cli-err.$$ || fail "sgd progress: $(cat /tmp/mfact-cli-err.$$)"
[ "$(wc -l <"$fu")" -eq 40 ] && [ "$(head -1 "$fv" | wc -w)" -eq 3 ] || fail "sgd factor files"
"$mfact" sgd "$ratings" --rank 513 2>/dev/null; [ $? -eq 2 ] || fail "sgd --rank 513 is not a usage error"
"$mfact" sgd "$ratings" --lr 0 2>/dev/null; [ $? -eq 2 ] || fail "sgd --lr 0 is not a usage error"
"$mfact" sgd "$ratings" --epochs -1 2>/dev/null; [ $? -eq 2 ] || fail "sgd --epochs -1 is not a usage error"
"$mfact" sgd --backend cpu "$ratings" --lr 1000 --constant-rate 2>/tmp/mfact-cli-err.$$; [ $? -eq 1 ] &&
  grep -q "smaller learning_rate" /tmp/mfact-cli-err.$$ || fail "sgd divergence: $(cat /tmp/mfact-cli-err.$$)"
"$mfact" sgd --help | has -- "--fp16" || fail "sgd --help"
# complete: a planted random matrix (--synthetic) recovered, a file with a held-out part and
# factors written, JSON, and bad values
json=$("$mfact" complete --backend cpu --synthetic 300,200,3,0.3 --seed 5 --json 2>/tmp/mfact-cli-err.$$) ||
  fail "complete --synthetic exited $?: $(cat /tmp/mfact-cli-err.$$)"
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["rows"] == 300 and d["cols"] == 200 and d["rank"] == 3 and d["variant"] == "scaled", d
assert 0.25 < d["density"] < 0.35 and d["stopped"] == "tolerance", d
assert d["relative_error_vs_planted"] < 1e-3 and d["error_entries"] == 60000, d
' || fail "complete --synthetic: $json"
grep -q "^== planting a 300 x 200 matrix of rank 3" /tmp/mfact-cli-err.$$ ||
  fail "complete --synthetic does not say what it plants: $(cat /tmp/mfact-cli-err.$$)"
out=$("$mfact" complete --backend cpu --synthetic 200,150,4,0.4 --condition 100 --plain \
      --max-iterations 3 2>/dev/null) || fail "complete --plain --condition exited $?"
echo "$out" | has "^variant plain$" && echo "$out" | has "^iterations 3$" &&
  echo "$out" | has "^stopped max iterations$" || fail "complete --plain: $out"
json=$("$mfact" complete --backend cpu --synthetic 400,300,4,0.3 --condition 100 \
       --rank-continuation --json 2>/dev/null) || fail "complete --rank-continuation exited $?"
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["rank_continuation"] == "yes" and d["stopped"] == "tolerance", d
assert d["relative_error_vs_planted"] < 1e-3, d
' || fail "complete --rank-continuation: $json"
lowrank=$(mktemp --suffix=.txt) fx=$(mktemp) fy=$(mktemp)
for i in $(seq 0 29); do for j in $(seq 0 19); do
  [ $(( (i * 7 + j * 3) % 3 )) -ne 0 ] && echo "$i $j $(( (i % 4 + 1) * (j % 3 + 1) ))"
done; done >"$lowrank"
out=$("$mfact" complete --backend cpu "$lowrank" --rank 2 --test-fraction 0.1 --tol 1e-4 --verbose \
      --output-x "$fx" --output-y "$fy" 2>/tmp/mfact-cli-err.$$) || fail "complete FILE exited $?"
echo "$out" | has "^rows 30$" && echo "$out" | has "^rank 2$" || fail "complete FILE: $out"
echo "$out" | grep -Eq "^test RMSE [0-9.e-]+$" || fail "complete test RMSE: $out"
grep -q "^iteration 1: relative residual" /tmp/mfact-cli-err.$$ ||
  fail "complete --verbose: $(cat /tmp/mfact-cli-err.$$)"
[ "$(wc -l <"$fx")" -eq 30 ] && [ "$(wc -l <"$fy")" -eq 20 ] && [ "$(head -1 "$fx" | wc -w)" -eq 2 ] ||
  fail "complete factor files"
json=$("$mfact" complete --backend cpu "$lowrank" --rank 1 --init spectral --json 2>/dev/null) ||
  fail "complete --json exited $?"
echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["init"]=="spectral" and d["observed"]>0, d' ||
  fail "complete --json: $json"
rm -f "$lowrank" "$fx" "$fy"
"$mfact" complete --synthetic 300,200,3 2>/dev/null; [ $? -eq 2 ] || fail "complete --synthetic M,N,R is not a usage error"
"$mfact" complete --synthetic 300,200,3,1.5 2>/dev/null; [ $? -eq 2 ] || fail "complete density 1.5 is not a usage error"
"$mfact" complete --synthetic 30,20,3,0.5 --rank 0 2>/dev/null; [ $? -eq 2 ] || fail "complete --rank 0 is not a usage error"
"$mfact" complete --synthetic 30,20,3,0.5 --tol 0 2>/dev/null; [ $? -eq 2 ] || fail "complete --tol 0 is not a usage error"
"$mfact" complete --synthetic 30,20,3,0.5 --init svd 2>/dev/null; [ $? -eq 2 ] || fail "complete --init svd is not a usage error"
"$mfact" complete "$tmp" --synthetic 30,20,3,0.5 2>/dev/null; [ $? -eq 2 ] || fail "complete FILE with --synthetic"
"$mfact" complete "$tmp" --condition 10 2>/dev/null; [ $? -eq 2 ] || fail "complete FILE with --condition"
"$mfact" complete 2>/dev/null; [ $? -eq 2 ] || fail "complete without FILE"
"$mfact" complete --backend cpu --synthetic 30,20,3,0.5 --rank 25 2>/tmp/mfact-cli-err.$$; [ $? -eq 1 ] &&
  grep -q "rank = 25 is outside 1..20" /tmp/mfact-cli-err.$$ || fail "complete rank above min(rows, cols): $(cat /tmp/mfact-cli-err.$$)"
"$mfact" complete --help | has -- "--synthetic" || fail "complete --help"
# ials and recommend: two groups of users, each playing its own half of the items. A random
# pick is in the user's group half the time, a learnt one nearly always.
plays=$(mktemp --suffix=.txt) recs=$(mktemp)
python3 -c '
import random
r = random.Random(4)
for u in range(60):
    for i in range(40):
        if (u < 30) == (i < 20) and r.random() < 0.5:
            print(u, i, r.randint(1, 5))
' >"$plays"
out=$("$mfact" ials --backend cpu "$plays" --rank 4 --iterations 6 --test-fraction 0.2 --seed 2 \
      --top 5 2>/tmp/mfact-cli-err.$$) || fail "ials exited $?: $(cat /tmp/mfact-cli-err.$$)"
# progress on stderr (stdout holds the results alone, so that --json stays one object)
grep -q "^iteration 6 (.*precision@5" /tmp/mfact-cli-err.$$ ||
  fail "ials per-iteration metrics: $(cat /tmp/mfact-cli-err.$$)"
! echo "$out" | has "^iteration [0-9]* (" || fail "ials progress on stdout: $out"
"$mfact" ials --backend cpu "$plays" --rank 4 --iterations 2 --json 2>/dev/null |
  python3 -c 'import json, sys; json.load(sys.stdin)' || fail "ials --json is not one JSON object"
# The ranking is measured after the last iteration only, unless --eval-each, and its cost is
# reported apart (issue 44 row 11); ials --output, recommend's, is refused, not ignored (row 6).
grep "^iteration 1 (" /tmp/mfact-cli-err.$$ | has precision && fail "ials measured the ranking after iteration 1"
echo "$out" | has "^evaluation seconds " || fail "ials does not report the evaluation's seconds: $out"
"$mfact" ials --backend cpu "$plays" --rank 4 --iterations 2 --test-fraction 0.2 --eval-each 2>&1 >/dev/null |
  grep -c "precision@" | has "^2$" || fail "ials --eval-each does not measure every iteration"
"$mfact" ials --backend cpu "$plays" --output /tmp/mfact-recs.$$ 2>/dev/null; [ $? -eq 2 ] ||
  fail "ials --output is not a usage error"
p=$(echo "$out" | awk '/^precision@5 /{print $2}')
python3 -c "import sys; sys.exit(0 if float('$p') > 0.3 else 1)" || fail "ials precision@5 $p: $out"
"$mfact" recommend --backend cpu "$plays" --rank 4 --iterations 6 --top 3 --output "$recs" >/dev/null ||
  fail "recommend exited $?"
[ "$(wc -l <"$recs")" -eq 180 ] || fail "recommend wrote $(wc -l <"$recs") lines, not 60 x 3"
awk '{ if (($1 < 30) != ($2 < 20)) bad++ } END { exit bad > 9 }' "$recs" ||
  fail "recommend: many items outside the user's group"
"$mfact" ials "$plays" --alpha -1 2>/dev/null; [ $? -eq 2 ] || fail "ials --alpha -1 is not a usage error"
"$mfact" ials "$plays" --confidence square 2>/dev/null; [ $? -eq 2 ] || fail "ials --confidence square"
"$mfact" --help | has "^  recommend " || fail "mfact --help does not list recommend"
# saved models: als --save-model, then predict in a new process gives the test RMSE the
# training printed (recomputed from the predictions). The test pairs hold no 0 index, but
# the model records the training file's base (0), so they are not read as 1-based.
saved=$(mktemp -d)
trap 'rm -f "$tmp" "$ratings" "$fu" "$fv" "$plays" "$recs"; rm -rf "$saved"' EXIT
awk '$1 > 0 && $1 < 30 && $2 > 0 && $2 < 20 && NR % 4 == 0' "$ratings" >"$saved/held.txt"
awk '!($1 > 0 && $1 < 30 && $2 > 0 && $2 < 20 && NR % 4 == 0)' "$ratings" >"$saved/kept.txt"
out=$("$mfact" als --backend cpu "$saved/kept.txt" --test "$saved/held.txt" --rank 3 --iterations 4 \
      --save-model "$saved/als.mfm" 2>/dev/null) || fail "als --save-model exited $?"
rmse=$(echo "$out" | awk '/^test RMSE [0-9]/{print $3}')
"$mfact" predict --backend cpu "$saved/als.mfm" "$saved/held.txt" >"$saved/pred.txt" ||
  fail "predict exited $?"
[ "$(wc -l <"$saved/pred.txt")" -eq "$(wc -l <"$saved/held.txt")" ] || fail "predict: one line a pair"
paste -d ' ' "$saved/pred.txt" "$saved/held.txt" |
  awk -v want="$rmse" '{ d = $1 - $4; s += d * d; n++ }
    END { got = sqrt(s / n); exit !(n > 0 && got - want < 2e-6 * want && want - got < 2e-6 * want) }' ||
  fail "predict: the RMSE of the predictions is not the training run's test RMSE $rmse"
"$mfact" predict "$saved/als.mfm" "$saved/held.txt" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["algorithm"] == "als" and d["rank"] == 3 and d["pairs"] == len(d["predictions"]) > 0, d
' || fail "predict --json"
# sgd saves too, without biases as asked; a model file is not overwritten by predict
"$mfact" sgd --backend cpu "$saved/kept.txt" --rank 2 --epochs 2 --no-biases \
  --save-model "$saved/sgd.mfm" >/dev/null 2>&1 || fail "sgd --save-model exited $?"
"$mfact" predict "$saved/sgd.mfm" "$saved/held.txt" --output "$saved/sgd.txt" | has "^algorithm sgd$" ||
  fail "predict --output summary"
"$mfact" predict "$saved/sgd.mfm" "$saved/held.txt" --output "$saved/sgd.mfm" 2>/dev/null
[ $? -eq 2 ] || fail "predict --output MODEL is not a usage error"
# a changed byte, a truncated file, a file that is no model: exit 1 with what is wrong
size=$(wc -c <"$saved/als.mfm")
cp "$saved/als.mfm" "$saved/bad.mfm"
printf '\377' | dd of="$saved/bad.mfm" bs=1 seek=$((size - 40)) conv=notrunc 2>/dev/null
"$mfact" predict "$saved/bad.mfm" "$saved/held.txt" >/dev/null 2>/tmp/mfact-cli-err.$$
[ $? -eq 1 ] && grep -q "bad.mfm: section [0-9] (.*) checksum mismatch" /tmp/mfact-cli-err.$$ ||
  fail "corrupted model: $(cat /tmp/mfact-cli-err.$$)"
head -c 100 "$saved/als.mfm" >"$saved/cut.mfm"
"$mfact" predict "$saved/cut.mfm" "$saved/held.txt" >/dev/null 2>/tmp/mfact-cli-err.$$
[ $? -eq 1 ] && grep -q "cut.mfm: truncated at byte 100" /tmp/mfact-cli-err.$$ ||
  fail "truncated model: $(cat /tmp/mfact-cli-err.$$)"
"$mfact" predict "$ratings" "$saved/held.txt" >/dev/null 2>/tmp/mfact-cli-err.$$
[ $? -eq 1 ] && grep -q "not an mfact model file" /tmp/mfact-cli-err.$$ ||
  fail "a ratings file as the model: $(cat /tmp/mfact-cli-err.$$)"
"$mfact" --help | has "^  predict " || fail "mfact --help does not list predict"
# recommend --model: the lists a training run writes, from its saved model and the training
# interactions left out; --users picks users
"$mfact" recommend --backend cpu "$plays" --rank 4 --iterations 6 --top 3 --output "$recs" \
  --save-model "$saved/ials.mfm" >/dev/null 2>&1 || fail "recommend --save-model exited $?"
"$mfact" recommend --backend cpu --model "$saved/ials.mfm" --exclude "$plays" --top 3 \
  --output "$saved/recs.txt" >/dev/null || fail "recommend --model exited $?"
cmp -s "$recs" "$saved/recs.txt" || fail "recommend --model: other lists than the training run's"
printf '7\n3\n' >"$saved/users.txt"
[ "$("$mfact" recommend --model "$saved/ials.mfm" --exclude "$plays" --users "$saved/users.txt" \
  --top 3 | awk '{print $1}' | uniq | tr '\n' ' ')" = "7 3 " ] || fail "recommend --users"
"$mfact" recommend --model "$saved/ials.mfm" "$plays" 2>/dev/null
[ $? -eq 2 ] || fail "recommend --model with a FILE to train on is not a usage error"
# recommend speaks the file's numbering: a 1-based file's lists name users 1..60, never 0
# (they had been 0-based, issue 44 row 8), from training and from the saved model alike
awk '{print $1 + 1, $2 + 1, $3}' "$plays" >"$saved/plays1.txt"
"$mfact" recommend --backend cpu "$saved/plays1.txt" --rank 4 --iterations 3 --top 2 \
  --save-model "$saved/one.mfm" 2>/dev/null >"$saved/recs1.txt" || fail "recommend on a 1-based file exited $?"
awk '$1 < 1 || $1 > 60 || $2 < 1 || $2 > 40 { bad++ } END { exit bad > 0 }' "$saved/recs1.txt" &&
  grep -q "^60 " "$saved/recs1.txt" || fail "recommend on a 1-based file: not 1-based ids"
"$mfact" recommend --backend cpu --model "$saved/one.mfm" --exclude "$saved/plays1.txt" --top 2 \
  >"$saved/recs2.txt" &&
  cmp -s "$saved/recs1.txt" "$saved/recs2.txt" || fail "recommend --model on a 1-based file: other lists"
# ids as users have them: a CSV with string users, sparse integer items and a header; a test
# file with a user and an item the training file lacks; the outputs in the file's ids
python3 -c '
import random
r = random.Random(5)
print("user,movieId,rating")
for u in range(40):
    for i in range(25):
        if r.random() < 0.4:
            print("u%d,%d,%d" % (u, 1000 * i + 7, r.randint(1, 5)))
' >"$saved/r.csv"
printf 'user,movieId,rating\nu3,7,4\nnewbie,1007,3\nu5,999999,2\n' >"$saved/t.csv"
ids=(--user-col user --item-col movieId --rating-col rating)
out=$("$mfact" als --backend cpu "$saved/r.csv" "${ids[@]}" --test "$saved/t.csv" --rank 3 \
  --iterations 3 --save-model "$saved/ids.mfm" --output-u "$saved/u.txt" --output-v "$saved/v.txt" \
  2>/dev/null) || fail "als with --user-col exited $?"
echo "$out" | has "^users 40$" && echo "$out" | has "^items 25$" &&
  echo "$out" | has "^test ratings unseen 2$" || fail "als with ids: $out"
[ "$(head -1 "$saved/u.txt" | awk '{print $1}')" = u0 ] && [ "$(wc -l <"$saved/v.txt")" -eq 25 ] &&
  awk '{ if ($1 % 1000 != 7) bad++ } END { exit bad > 0 }' "$saved/v.txt" ||
  fail "--output-u/-v do not start with the file's ids"
rmse=$(echo "$out" | awk '/^test RMSE [0-9]/{print $3}')
"$mfact" predict "$saved/ids.mfm" "$saved/t.csv" | paste -d ' ' - <(tail -n +2 "$saved/t.csv" | tr , ' ') |
  awk -v want="$rmse" '{ d = $1 - $4; s += d * d; n++ }
    END { got = sqrt(s / n); exit !(n == 3 && got - want < 2e-6 * want && want - got < 2e-6 * want) }' ||
  fail "predict with ids: not the training run's test RMSE $rmse"
printf 'u7\nnobody\n' >"$saved/who.txt"
"$mfact" recommend --model "$saved/ids.mfm" --users "$saved/who.txt" --exclude "$saved/r.csv" \
  "${ids[@]}" --top 2 >"$saved/idrecs.txt" || fail "recommend --model with ids exited $?"
[ "$(awk '{print $1}' "$saved/idrecs.txt" | uniq | tr '\n' ' ')" = "u7 nobody " ] &&
  awk '{ if ($2 % 1000 != 7) bad++ } END { exit bad > 0 }' "$saved/idrecs.txt" ||
  fail "recommend --model with ids: $(cat "$saved/idrecs.txt")"
grep -q "^u7 " "$saved/idrecs.txt" && ! grep -E "^u7 ($(awk -F, '$1 == "u7" {printf "%s|", $2}' "$saved/r.csv")x) " \
  "$saved/idrecs.txt" >/dev/null || fail "recommend --model --exclude with ids kept a training item"
"$mfact" als --backend cpu "$saved/r.csv" --user-col user --item-col movieid 2>/tmp/mfact-cli-err.$$ >/dev/null
[ $? -eq 1 ] && grep -q 'r.csv:1: no column "movieid" in the header' /tmp/mfact-cli-err.$$ ||
  fail "an unknown column: $(cat /tmp/mfact-cli-err.$$)"
"$mfact" als "$saved/r.csv" --user-col 0 2>/dev/null; [ $? -eq 2 ] || fail "--user-col 0 is not a usage error"
rm -rf "$saved"
rm -f "$plays" "$recs"
# bmf: a .in file (two blocks), factors as text and packed, JSON, progress, bad values
bin=$(mktemp --suffix=.in)
fa=$(mktemp) fb=$(mktemp) pa=$(mktemp)
trap 'rm -f "$tmp" "$bin" "$fa" "$fb" "$pa"' EXIT
{ echo "6 6 18"; for i in 0 1 2; do for j in 0 1 2; do echo "$i $j"; done; done
  for i in 3 4 5; do for j in 3 4 5; do echo "$i $j"; done; done; } >"$bin"
# (the sampled start, so that there are sweeps to show: the default Asso start fits
# these blocks exactly before the first sweep)
out=$("$mfact" bmf --backend cpu "$bin" --rank 2 --init sample --output-a "$fa" --output-b "$fb" \
      --verbose 2>/tmp/mfact-cli-err.$$) || fail "bmf exited $?"
echo "$out" | has "^error 0$" || fail "bmf error: $out"
echo "$out" | has "^F1 1$" || fail "bmf F1: $out"
grep -q "^sweep 1: error" /tmp/mfact-cli-err.$$ || fail "bmf progress: $(cat /tmp/mfact-cli-err.$$)"
[ "$(wc -l <"$fa")" -eq 6 ] && [ "$(head -1 "$fa")" != "" ] && [ "$(head -c 2 "$fb")" != "" ] ||
  fail "bmf factor files"
out=$("$mfact" bmf --backend cpu "$bin" --rank 2) || fail "bmf (default start) exited $?"
echo "$out" | has "^error 0$" || fail "bmf default start error: $out"
echo "$out" | has "^sweeps 0$" || fail "bmf default start is not Asso's exact cover: $out"
[ "$(head -1 "$fa" | tr -d '\n' | wc -c)" -eq 2 ] || fail "bmf text factor width"
"$mfact" bmf --backend cpu "$bin" --rank 70 --output-a "$pa" --packed >/dev/null || fail "bmf --packed"
[ "$(stat -c %s "$pa")" -eq $((6 * 2 * 8)) ] || fail "bmf packed size $(stat -c %s "$pa")"
json=$("$mfact" bmf --backend cpu "$bin" --rank 2 --json) || fail "bmf --json exited $?"
echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["error"]==0 and d["rank"]==2, d' ||
  fail "bmf --json: $json"
"$mfact" bmf "$bin" --rank 0 2>/dev/null; [ $? -eq 2 ] || fail "bmf --rank 0 is not a usage error"
"$mfact" bmf "$bin" --rank 1025 2>/dev/null; [ $? -eq 2 ] || fail "bmf --rank 1025 is not a usage error"
"$mfact" bmf "$bin" --init nope 2>/dev/null; [ $? -eq 2 ] || fail "bmf --init nope is not a usage error"
"$mfact" bmf 2>/dev/null; [ $? -eq 2 ] || fail "bmf without FILE"
"$mfact" bmf --help | has -- "--instances" || fail "bmf --help"

# Ids as users have them in bmf, complete and sddmm (issue 44 row 8): one matrix as a CSV with
# string ids and a header, as sparse integer ids, and as the dense indices the ids map to (in
# the order the file first names them). Each factor line of the id files starts with its
# row's (column's) id, in that order, followed by the very line the plain file gets; the
# plain file's lines have no id in front (as before ids).
idd=$(mktemp -d)
trap 'rm -f "$tmp" "$bin" "$fa" "$fb" "$pa"; rm -rf "$idd"' EXIT
python3 - "$idd" <<'PY'
import random, sys
d, r = sys.argv[1], random.Random(3)
users, items = {}, {}
with open(d + "/s.csv", "w") as s, open(d + "/n.txt", "w") as n, open(d + "/p.txt", "w") as p:
    s.write("user,item,rating\n")
    for u in r.sample(range(12), 12):
        for i in r.sample(range(9), 9):
            if u % 3 == i % 3 or r.random() < 0.1:
                ui, ii = users.setdefault(u, len(users)), items.setdefault(i, len(items))
                v = (u % 3 + 1) * (i % 4 + 1) if u % 3 == i % 3 else 1
                s.write("u%d,it%d,%d\n" % (u, i, v))
                n.write("%d %d %d\n" % (1000 + 7 * u, 500000 + 13 * i, v))
                p.write("%d %d %d\n" % (ui, ii, v))
PY
first() { awk -v c="$2" "$3"' !seen[$c]++ { print $c }' "$1"; } # a file's ids, first seen first
first "$idd/s.csv" 1 'BEGIN { FS = "," } NR > 1 &&' >"$idd/s.rows"
first "$idd/s.csv" 2 'BEGIN { FS = "," } NR > 1 &&' >"$idd/s.cols"
first "$idd/n.txt" 1 '' >"$idd/n.rows"
first "$idd/n.txt" 2 '' >"$idd/n.cols"
[ "$(wc -l <"$idd/s.rows")" -eq 12 ] && [ "$(wc -l <"$idd/n.cols")" -eq 9 ] || fail "the id files' ids"
scsv=(--user-col user --item-col item)
# (one thread: the id and plain runs compute the same numbers for the same indices)
for cmd in bmf complete; do
  [ $cmd = bmf ] && o=(--rank 3 --output-a) p=--output-b || o=(--rank 2 --test-fraction 0.2 --output-x) p=--output-y
  "$mfact" $cmd --backend cpu --threads 1 "$idd/p.txt" "${o[@]}" "$idd/p.$cmd.r" $p "$idd/p.$cmd.c" \
    >/dev/null 2>&1 || fail "$cmd on plain indices exited $?"
  [ $cmd = bmf ] && tail=() || tail=(--rating-col rating)
  for f in s n; do
    [ $f = s ] && how=("$idd/s.csv" "${scsv[@]}" "${tail[@]}") || how=("$idd/n.txt" --ids)
    "$mfact" $cmd --backend cpu --threads 1 "${how[@]}" "${o[@]}" "$idd/$f.$cmd.r" $p "$idd/$f.$cmd.c" \
      >/dev/null 2>"$idd/err" || fail "$cmd ${how[*]} exited $?: $(cat "$idd/err")"
    for side in r c; do
      [ $side = r ] && ids="$idd/$f.rows" || ids="$idd/$f.cols"
      cmp -s <(cut -d' ' -f1 "$idd/$f.$cmd.$side") "$ids" ||
        fail "$cmd ${how[*]}: the $side factor's lines do not start with the file's ids: $(head -3 "$idd/$f.$cmd.$side")"
      cmp -s <(cut -d' ' -f2- "$idd/$f.$cmd.$side") "$idd/p.$cmd.$side" ||
        fail "$cmd ${how[*]}: the $side factor's lines after the ids are not the plain file's"
    done
  done
done
[ "$(head -1 "$idd/p.bmf.r")" = "$(head -1 "$idd/p.bmf.r" | tr -dc 01)" ] || fail "bmf plain lines: $(head -1 "$idd/p.bmf.r")"
# The same CSV by position (--ids, no names): bmf reads no values, and its header line
# "user,item,rating" is still a header (judged by the field a value would come from), not a
# 13th user "user" (it was, silently).
"$mfact" bmf --backend cpu --threads 1 "$idd/s.csv" --ids --rank 3 --output-a "$idd/h.r" \
  --output-b "$idd/h.c" >/dev/null 2>"$idd/err" || fail "bmf s.csv --ids exited $?: $(cat "$idd/err")"
cmp -s <(cut -d' ' -f1 "$idd/h.r") "$idd/s.rows" ||
  fail "bmf s.csv --ids: the header became rows: $(cut -d' ' -f1 "$idd/h.r" | head -3 | tr '\n' ' ')"
[ "$(head -1 "$idd/p.complete.r" | wc -w)" -eq 2 ] || fail "complete plain lines: $(head -1 "$idd/p.complete.r")"
# sddmm reads the ids (the header is no row) and, writing no per-row lines, reports the shape
for how in "$idd/s.csv --user-col user --item-col item --rating-col rating" "$idd/n.txt --ids"; do
  out=$("$mfact" sddmm --backend cpu $how --k 2 --repeat 1) || fail "sddmm $how exited $?"
  echo "$out" | has "^rows 12$" && echo "$out" | has "^cols 9$" &&
    echo "$out" | has "^nnz $(wc -l <"$idd/p.txt")$" || fail "sddmm $how: $out"
done
# where an id option means nothing: a usage error that says why
for bad in "sddmm --shape 10,10,0.1 --ids:generated pattern has no ids" \
  "complete --synthetic 30,20,3,0.5 --user-col 1:--synthetic's matrix has no ids" \
  "bmf $idd/n.txt --ids --packed --output-a $idd/x:packed words carry no ids" \
  "bmf $idd/s.csv --ids --rating-col 3:bmf reads no values" \
  "bmf $idd/p.txt --output-a $idd/p.txt:would be overwritten"; do
  "$mfact" ${bad%%:*} 2>"$idd/err" >/dev/null; rc=$?
  [ $rc -eq 2 ] && grep -q -- "${bad#*:}" "$idd/err" || fail "mfact ${bad%%:*}: exit $rc, $(cat "$idd/err")"
done
"$mfact" bmf --help | has "starts with its row's (column's) id" || fail "bmf --help says nothing of ids"
"$mfact" complete --help | has "starts with its row's (column's) id" || fail "complete --help says nothing of ids"
rm -rf "$idd"

# Reading flags on every subcommand: --sum-duplicates, --format; and what a newcomer trips on
dup=$(mktemp --suffix=.txt) snap=$(mktemp --suffix=.txt)
trap 'rm -f "$tmp" "$bin" "$fa" "$fb" "$pa" "$dup" "$snap"' EXIT
{ cat "$ratings"; head -3 "$ratings"; } >"$dup"
# Ratings given again replace the earlier ones (as FilmTrust ships with 3 such lines): the
# repeated lines add no ratings; --sum-duplicates still sums; other commands still refuse.
unique=$("$mfact" demo --backend cpu "$ratings" | sed -n 's/^nnz //p')
for cmd in als sgd; do
  n=$("$mfact" $cmd --backend cpu "$dup" --rank 2 2>/dev/null | sed -n 's/^train ratings //p')
  [ -n "$unique" ] && [ "$n" = "$unique" ] || fail "$cmd on repeats: $n ratings, not $unique"
  "$mfact" $cmd --backend cpu "$dup" --rank 2 --sum-duplicates >/dev/null 2>&1 ||
    fail "$cmd --sum-duplicates exited $?"
  "$mfact" $cmd --backend cpu "$dup" --rank 2 --auto --no-biases --lambda-bias 0.2 >/dev/null 2>&1 ||
    fail "$cmd --auto --no-biases --lambda-bias exited $?"
  "$mfact" $cmd --backend cpu "$dup" --lambda-bias -1 2>/dev/null; [ $? -eq 2 ] ||
    fail "$cmd --lambda-bias -1 is not a usage error"
done
# One rule for repeats (issue 44 row 9): demo reads a file as the fits do (the last kept),
# --duplicates error refuses on every command, --duplicates sum sums.
[ "$("$mfact" demo --backend cpu "$dup" | sed -n 's/^nnz //p')" = "$unique" ] ||
  fail "demo on repeats does not read them as the fits do"
for cmd in demo als ials; do
  "$mfact" $cmd --backend cpu "$dup" --duplicates error 2>/tmp/mfact-cli-err.$$ >/dev/null; [ $? -eq 1 ] &&
    grep -q "duplicate entry: row .* repeats line 1 " /tmp/mfact-cli-err.$$ ||
    fail "$cmd --duplicates error on repeats: $(cat /tmp/mfact-cli-err.$$)"
done
mean() { "$mfact" demo --backend cpu "$dup" --json "$@" | python3 -c 'import json, sys; print(json.load(sys.stdin)["mean_value"])'; }
[ "$(mean)" != "$(mean --duplicates sum)" ] || fail "demo --duplicates sum did not sum the repeats"
[ "$(mean --sum-duplicates)" = "$(mean --duplicates sum)" ] || fail "--sum-duplicates is not --duplicates sum"
"$mfact" demo "$dup" --duplicates twice 2>/dev/null; [ $? -eq 2 ] || fail "--duplicates twice is not a usage error"
printf '3 2\n0 1\n1 2\n' >"$snap"
"$mfact" demo --backend cpu "$snap" | has "^rows 3$" || fail "demo on a SNAP count line"
"$mfact" demo --backend cpu "$snap" --format triplets | has "^rows 4$" || fail "demo --format triplets"
"$mfact" sddmm --backend cpu "$snap" --format pairs --k 2 | has "^nnz 2$" || fail "sddmm --format pairs"
"$mfact" bmf --backend cpu "$snap" --format pairs --rank 1 | has "^ones 2$" || fail "bmf --format pairs"
"$mfact" demo "$snap" --format xml 2>/dev/null; [ $? -eq 2 ] || fail "--format xml is not a usage error"
"$mfact" als --backend cpu "$ratings" --threads 100000 2>/tmp/mfact-cli-err.$$; [ $? -eq 1 ] &&
  grep -q "cpu_threads = 100000 is more than" /tmp/mfact-cli-err.$$ ||
  fail "--threads 100000: $(cat /tmp/mfact-cli-err.$$)"
"$mfact" sgd --backend cpu "$ratings" --lambda 1000 --lr 0.1 --constant-rate 2>/tmp/mfact-cli-err.$$; [ $? -eq 1 ] &&
  grep -q "lambda_v 1000) = 100 >= 1" /tmp/mfact-cli-err.$$ || fail "sgd huge lambda: $(cat /tmp/mfact-cli-err.$$)"
# A file is read once: through a pipe, /dev/stdin, a shell's <(...) and FIFOs (the format
# from the name), format auto reads every entry (detection used to consume what the reader
# then missed: 99,790 of 100,000 ratings lost through a pipe)
big=$(mktemp --suffix=.tsv) fifos=$(mktemp -d)
trap 'rm -f "$tmp" "$bin" "$fa" "$fb" "$pa" "$dup" "$snap" "$big"; rm -rf "$fifos"' EXIT
awk 'BEGIN { print "user\titem\trating"; for (k = 0; k < 20000; k++) print k % 400 + 1 "\t" int(k / 400) + 1 "\t" k % 5 + 1 }' >"$big"
n=$(cat "$big" | "$mfact" demo --backend cpu /dev/stdin 2>&1 | sed -n 's/^nnz //p')
[ "$n" = 20000 ] || fail "cat FILE | mfact demo /dev/stdin read '$n' entries, not 20000"
n=$("$mfact" demo --backend cpu <(cat "$big") 2>&1 | sed -n 's/^nnz //p')
[ "$n" = 20000 ] || fail "mfact demo <(cat FILE) read '$n' entries, not 20000"
n=$(cat "$tmp" | "$mfact" sddmm --backend cpu /dev/stdin --k 2 2>&1 | sed -n 's/^nnz //p')
[ "$n" = 2 ] || fail "a MatrixMarket file through a pipe read '$n' entries, not 2"
mkfifo "$fifos/r.in" "$fifos/r.bin"
cat "$bin" >"$fifos/r.in" &
n=$("$mfact" bmf --backend cpu "$fifos/r.in" --rank 2 2>&1 | sed -n 's/^ones //p')
wait
[ "$n" = 18 ] || fail "a pairs FIFO read '$n' ones, not 18"
python3 -c '
import struct, sys
sys.stdout.buffer.write(b"".join(struct.pack("<iif", k % 100, k // 100, 1 + k % 5) for k in range(20000)))
' >"$fifos/r.bin" &
n=$("$mfact" demo --backend cpu "$fifos/r.bin" 2>&1 | sed -n 's/^nnz //p')
wait
[ "$n" = 20000 ] || fail "a binary FIFO read '$n' entries, not 20000"
# A --test file takes FILE's index base: a 0-based training file and a test file that holds
# no 0 index score as the same data 1-based, and as with --index-base 0 (its own detection
# took it as 1-based and moved every test rating)
base=$(mktemp -d)
trap 'rm -f "$tmp" "$bin" "$fa" "$fb" "$pa" "$dup" "$snap" "$big"; rm -rf "$fifos" "$base"' EXIT
awk 'NR % 4 != 0 || $1 == 0 || $2 == 0 || $1 >= 30 || $2 >= 20' "$ratings" >"$base/train0.txt"
awk 'NR % 4 == 0 && $1 > 0 && $2 > 0 && $1 < 30 && $2 < 20' "$ratings" >"$base/test0.txt"
for f in train test; do awk '{ print $1 + 1, $2 + 1, $3 }' "$base/${f}0.txt" >"$base/${f}1.txt"; done
head -1 "$base/train0.txt" | has "^0 " || fail "the training file has no 0 index"
grep -q "^0 \| 0 " "$base/test0.txt" && fail "the test file has a 0 index"
rmse() { "$mfact" als --backend cpu --rank 2 --iterations 5 "$@" 2>/dev/null | sed -n 's/^test RMSE //p'; }
# --log info: the library's messages on stderr (an ALS fit's phases); without it, none
"$mfact" als --backend cpu --rank 2 --iterations 2 "$base/train0.txt" --log info 2>&1 >/dev/null |
  has "^mfact: mf_als_run: rank 0 of 1: the iterations: [0-9.]* s$" ||
  fail "als --log info does not print the fit's phases"
"$mfact" als --backend cpu --rank 2 --iterations 2 "$base/train0.txt" 2>&1 >/dev/null |
  has "^mfact: " && fail "als without --log prints the library's messages"
loud=$("$mfact" als --backend cpu "$base/train0.txt" --log loud 2>&1 >/dev/null) &&
  fail "als --log loud succeeded"
grep -q -- "--log takes off, error, warning, info or debug, not 'loud'" <<<"$loud" ||
  fail "als --log loud is not refused by name: $loud"
auto=$(rmse "$base/train0.txt" --test "$base/test0.txt")
[ -n "$auto" ] || fail "als --test on a 0-based pair failed"
[ "$auto" = "$(rmse "$base/train1.txt" --test "$base/test1.txt")" ] ||
  fail "test RMSE $auto of the 0-based files is not that of the same data 1-based"
[ "$auto" = "$(rmse "$base/train0.txt" --test "$base/test0.txt" --index-base 0)" ] ||
  fail "test RMSE $auto is not that with --index-base 0"
# ... but a MatrixMarket test file keeps its own convention (1-based by definition)
shape=$(awk '$1 >= r { r = $1 + 1 } $2 >= c { c = $2 + 1 } END { print r, c }' "$base/train0.txt")
{ echo "%%MatrixMarket matrix coordinate real general"; echo "$shape $(wc -l <"$base/test1.txt")"
  cat "$base/test1.txt"; } >"$base/test.mtx"
[ "$auto" = "$(rmse "$base/train0.txt" --test "$base/test.mtx")" ] ||
  fail "a MatrixMarket test file beside a 0-based training file was renumbered"
{ printf '\357\273\277'; cat "$base/test.mtx"; } >"$base/test-bom.txt" # a byte-order mark first
[ "$auto" = "$(rmse "$base/train0.txt" --test "$base/test-bom.txt")" ] ||
  fail "a MatrixMarket test file after a byte-order mark was renumbered"
"$mfact" demo --backend cpu "$base/train0.txt" --index-base 1 2>/tmp/mfact-cli-err.$$ >/dev/null; [ $? -eq 1 ] &&
  grep -q "row index 0 is below the index base 1" /tmp/mfact-cli-err.$$ ||
  fail "--index-base 1 on a 0-based file: $(cat /tmp/mfact-cli-err.$$)"
rows=$(awk '$1 >= n { n = $1 + 1 } END { print n }' "$base/test0.txt")
"$mfact" demo --backend cpu "$base/test0.txt" --index-base 0 | has "^rows $rows$" || fail "demo --index-base 0"
"$mfact" demo --backend cpu "$base/test0.txt" | has "^rows $((rows - 1))$" || fail "demo without --index-base"
"$mfact" demo "$base/train0.txt" --index-base 2 2>/dev/null; [ $? -eq 2 ] || fail "--index-base 2 is not a usage error"
# Off a terminal bmf prints nothing but its results; the search ends within a sweep of --time-limit.
# A run the clock ended says so (issue 44 row 11).
"$mfact" bmf --backend cpu "$bin" --rank 2 | has "^stopped search ended$" || fail "bmf: how it stopped"
"$mfact" bmf --backend cpu "$bin" --rank 2 --time-limit 0.000001 2>/dev/null | has "^stopped time limit$" ||
  fail "bmf --time-limit: not reported"
"$mfact" bmf --backend cpu "$bin" --rank 2 2>/tmp/mfact-cli-err.$$ >/dev/null && [ ! -s /tmp/mfact-cli-err.$$ ] ||
  fail "bmf wrote to stderr off a terminal: $(cat /tmp/mfact-cli-err.$$)"
# On a terminal (script(1) makes one) a long search shows its progress line unasked.
if command -v script >/dev/null; then
  # Captured whole first: grep -q would close the pipe early, and pipefail blames script.
  tty=$(script -qec "'$mfact' bmf --backend cpu '$bin' --rank 1 --time-limit 1.5 --patience 0 \
        --max-sweeps 100000000" /dev/null </dev/null)
  echo "$tty" | grep -aq "sweep [0-9]*: relative error" || fail "bmf shows no progress on a terminal"
fi
# A test file with users and items the training file lacks (issue 44 row 3): counted, and
# predicted from the mean and the known biases, never an error. The test RMSE over all of
# them equals what mfact predict gives from the saved model in a new process.
awk '{ print $1 + 1, $2 + 1, $3 }' "$base/test0.txt" >"$base/test-new.txt"
users=$(awk '$1 > n { n = $1 } END { print n }' "$base/train1.txt")
items=$(awk '$2 > n { n = $2 } END { print n }' "$base/train1.txt")
printf '%d 1 4\n1 %d 2\n%d %d 5\n' $((users + 1)) $((items + 1)) $((users + 2)) $((items + 2)) >>"$base/test-new.txt"
out=$("$mfact" als --backend cpu "$base/train1.txt" --test "$base/test-new.txt" --rank 2 \
      --iterations 5 --save-model "$base/unseen.mfm" 2>/dev/null) || fail "als with unseen test users and items: exit $?"
echo "$out" | has "^test ratings unseen 3$" || fail "the unseen test ratings are not counted: $out"
reported=$(echo "$out" | sed -n 's/^test RMSE //p')
"$mfact" predict "$base/unseen.mfm" "$base/test-new.txt" >"$base/unseen.pred" || fail "predict on unseen pairs"
paste -d' ' "$base/test-new.txt" "$base/unseen.pred" |
  awk -v r="$reported" '{ e = $3 - $4; s += e * e; n++ } END { d = sqrt(s / n) - r; exit (d < 0 ? -d : d) > 2e-5 }' ||
  fail "test RMSE $reported is not the RMSE of the saved model's predictions"
# One way to write options on every command (issue 44 row 13): --name=value is --name value,
# "--" ends the options (a file may then start with '-'), --rows/--cols give FILE's shape.
spaced=$("$mfact" als --backend cpu "$base/train1.txt" --rank 3 --iterations 2 2>/dev/null | grep "^train RMSE")
[ -n "$spaced" ] && [ "$spaced" = "$("$mfact" als --backend=cpu "$base/train1.txt" --rank=3 --iterations=2 2>/dev/null | grep "^train RMSE")" ] ||
  fail "--name=value differs from --name value"
cp "$base/train1.txt" "$base/-dash.txt"
[ "$spaced" = "$(cd "$base" && "$mfact" als --backend cpu --rank 3 --iterations 2 -- -dash.txt 2>/dev/null | grep "^train RMSE")" ] ||
  fail "a file after -- that starts with '-'"
"$mfact" demo --backend cpu "$base/train1.txt" --rows 1000 --cols=900 | has "^rows 1000$" || fail "demo --rows"
# One parser for every command (cli/options.c), each command's options in a table from which
# its --help is printed: --name=value, "--", an unknown option (exit 2, named) and a missing
# value on every command, and every option of a command's tables in its --help.
src=$(cd "$(dirname "$0")/../../cli" && pwd)
for cmd in info demo als sgd ials recommend "recommend --model=m" predict bmf complete sddmm; do
  "$mfact" $cmd --threads=1 --help >/dev/null || fail "$cmd --threads=1 --help exited $?"
  "$mfact" $cmd --threads=-1 --help >/dev/null 2>/tmp/mfact-cli-err.$$; rc=$?
  [ $rc -eq 2 ] && grep -q -- "--threads takes" /tmp/mfact-cli-err.$$ ||
    fail "$cmd --threads=-1 exited $rc: $(cat /tmp/mfact-cli-err.$$)"
  "$mfact" $cmd --no-such-option "$base/train1.txt" >/dev/null 2>/tmp/mfact-cli-err.$$; rc=$?
  [ $rc -eq 2 ] && grep -q "^mfact ${cmd%% *}: unknown option '--no-such-option'" /tmp/mfact-cli-err.$$ ||
    fail "$cmd --no-such-option exited $rc: $(cat /tmp/mfact-cli-err.$$)"
  "$mfact" $cmd --seed >/dev/null 2>/tmp/mfact-cli-err.$$; rc=$?
  [ $rc -eq 2 ] && grep -q -- "--seed needs a value" /tmp/mfact-cli-err.$$ ||
    fail "$cmd --seed without a value exited $rc: $(cat /tmp/mfact-cli-err.$$)"
  case $cmd in
    als | sgd) tables="cmd_$cmd.c ratings.c" ;;
    recommend) tables=cmd_ials.c ;;
    "recommend --model=m") tables=cmd_recommend_model.c ;;
    *) tables=cmd_$cmd.c ;;
  esac
  help=$("$mfact" $cmd --help) || fail "$cmd --help exited $?"
  opts=$(cd "$src" && cat $tables options.c | grep -oE '(CLI_OPT_[A-Z]+\(|\.name = )"--[a-z0-9-]+"' |
         grep -oE -- '--[a-z0-9-]+' | sort -u)
  [ "$(echo "$opts" | wc -l)" -ge 17 ] || fail "$cmd: the option tables were not found in $src"
  for opt in $opts; do
    grep -qE -- "^  $opt( |$)" <<<"$help" || fail "$cmd --help does not list $opt"
  done
done
"$mfact" sgd --backend=cpu --epochs=1 --rank=2 "$base/train1.txt" | has "^epochs 1$" || fail "sgd --epochs=1"
"$mfact" bmf --json=yes "$base/train1.txt" 2>/dev/null; [ $? -eq 2 ] || fail "a flag with a value is not a usage error"
(cd "$base" && "$mfact" demo --backend cpu -- -dash.txt) | has "^rows " || fail "demo -- -dash.txt"
(cd "$base" && "$mfact" sgd --backend cpu --epochs 1 -- -dash.txt --rank 2 >/dev/null 2>&1); [ $? -eq 2 ] ||
  fail "a word after -- is an option"
# --weighting count without --lambda-bias weights the biases' lambda alike: it is --lambda
# (issue 44 row 13: the unweighted default 5 had been taken, 5 times each row's count)
w=(als --backend cpu "$base/train1.txt" --rank 3 --iterations 3 --weighting count --lambda 0.05)
"$mfact" "${w[@]}" --output-u "$base/w.u" >/dev/null 2>&1 || fail "als --weighting count exited $?"
"$mfact" "${w[@]}" --lambda-bias 0.05 --output-u "$base/w05.u" >/dev/null 2>&1 || fail "als --lambda-bias 0.05"
"$mfact" "${w[@]}" --lambda-bias 5 --output-u "$base/w5.u" >/dev/null 2>&1 || fail "als --lambda-bias 5"
cmp -s "$base/w.u" "$base/w05.u" || fail "--weighting count: lambda_bias is not lambda"
cmp -s "$base/w.u" "$base/w5.u" && fail "--weighting count: lambda_bias is the unweighted default"
"$mfact" demo "$base/train1.txt" --rows 0 2>/dev/null; [ $? -eq 2 ] || fail "--rows 0 is not a usage error"
# Outputs are checked before anything is read or trained (issue 44 row 5): an output that is
# the input (under any name), two outputs to one file, an unwritable one: never a fit that
# overwrites its data or fails at its end without the reason.
cp "$base/train1.txt" "$base/in.txt"
ln -s "$base/in.txt" "$base/alias.txt"
before=$(cksum <"$base/in.txt")
for bad in "--output-u $base/in.txt" "--output-v $base/alias.txt" "--output-u $base/../$(basename "$base")/in.txt" \
           "--output-u $base/o.txt --output-v $base/o.txt"; do
  "$mfact" als --backend cpu "$base/in.txt" --iterations 1 $bad >/dev/null 2>/tmp/mfact-cli-err.$$
  rc=$?
  [ $rc -eq 2 ] || fail "als $bad exited $rc, not 2 (usage)"
  grep -q "overwritten\|one file" /tmp/mfact-cli-err.$$ || fail "als $bad: $(cat /tmp/mfact-cli-err.$$)"
done
[ "$(cksum <"$base/in.txt")" = "$before" ] || fail "the input was changed"
"$mfact" complete --backend cpu "$base/in.txt" --output-x "$base/x" --output-y "$base/x" 2>/dev/null
[ $? -eq 2 ] || fail "complete with one file for X and Y is not a usage error"
"$mfact" sgd --backend cpu "$base/in.txt" --output-v "$base/none/v.txt" 2>/tmp/mfact-cli-err.$$ >/dev/null
[ $? -eq 1 ] && grep -q "cannot create .*none/v.txt: No such file or directory" /tmp/mfact-cli-err.$$ ||
  fail "an output in a missing directory: $(cat /tmp/mfact-cli-err.$$)"
! grep -q "epoch\|iteration" /tmp/mfact-cli-err.$$ || fail "sgd trained before finding its output unwritable"
# Launched as 2, 3 or 4 CPU processes by mpirun, the tool fits one group over MPI: ALS's
# factors are one process's bit for bit, and rank 0 alone prints. Skipped without mpirun or MPI in the build.
if command -v mpirun >/dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # Open MPI's guard for root
  over=$(mpirun --version 2>&1 | has "Open MPI" && echo --oversubscribe || true)
  als=(als --backend cpu "$base/train1.txt" --rank 4 --iterations 4)
  "$mfact" "${als[@]}" --output-u "$base/one.u" --output-v "$base/one.v" \
    --save-model "$base/one.mfm" >"$base/one.out" 2>/dev/null || fail "als for the MPI comparison"
  if mpirun $over -np 2 "$mfact" "${als[@]}" --output-u "$base/mpi.u" --output-v "$base/mpi.v" \
    --save-model "$base/mpi.mfm" >"$base/mpi.out" 2>/tmp/mfact-cli-err.$$; then
    cmp -s "$base/one.u" "$base/mpi.u" && cmp -s "$base/one.v" "$base/mpi.v" ||
      fail "mpirun -np 2: the factors are not one process's"
    cmp -s "$base/one.mfm" "$base/mpi.mfm" || fail "mpirun -np 2: the saved model is not one process's"
    [ "$(grep -c '^train RMSE' "$base/mpi.out")" = 1 ] || fail "mpirun -np 2: not one result: $(cat "$base/mpi.out")"
    # sgd, complete and ials take parts too (sgd: each rank gathers its users' ratings;
    # complete and ials: its rows and columns): over mpirun, --split-input writes the
    # whole file's factors bit for bit (sgd with one worker a rank). split_equals A B CMD...: the two
    # factor outputs (--output-A/-B) of CMD from the whole file and from split input.
    split_equals() {
      local a=$1 b=$2 how; shift 2
      for how in whole split; do
        local extra=(); [ "$how" = split ] && extra=(--split-input)
        mpirun $over -np $np "$mfact" "$@" "${extra[@]}" --output-$a "$base/$how.$a" \
          --output-$b "$base/$how.$b" >/dev/null 2>/tmp/mfact-cli-err.$$ ||
          fail "$1 ${extra[*]} under mpirun -np $np: $(cat /tmp/mfact-cli-err.$$)"
      done
      cmp -s "$base/whole.$a" "$base/split.$a" && cmp -s "$base/whole.$b" "$base/split.$b" ||
        fail "mpirun -np $np $1 --split-input: the factors are not the whole file's"
    }
    for np in 2 3 4; do
      # The same at 3 and 4 processes (issue 43's launched fits run 4): the whole file's fit
      # first, as the gate above did at 2.
      if [ "$np" != 2 ]; then
        mpirun $over -np $np "$mfact" "${als[@]}" --output-u "$base/mpi.u" --output-v "$base/mpi.v" \
          --save-model "$base/mpi.mfm" >"$base/mpi.out" 2>/tmp/mfact-cli-err.$$ ||
          fail "als under mpirun -np $np: $(cat /tmp/mfact-cli-err.$$)"
        cmp -s "$base/one.u" "$base/mpi.u" && cmp -s "$base/one.v" "$base/mpi.v" &&
          cmp -s "$base/one.mfm" "$base/mpi.mfm" || fail "mpirun -np $np: the fit is not one process's"
      fi
      # --split-input: each rank keeps every other entry of the file and the fit moves them to
      # their lines' owners; integral ratings sum exactly, so the factors are one process's.
      mpirun $over -np $np "$mfact" "${als[@]}" --split-input --output-u "$base/split.u" \
        --output-v "$base/split.v" >"$base/split.out" 2>/tmp/mfact-cli-err.$$ ||
        fail "als --split-input under mpirun -np $np: $(cat /tmp/mfact-cli-err.$$)"
      cmp -s "$base/one.u" "$base/split.u" && cmp -s "$base/one.v" "$base/split.v" ||
        fail "mpirun -np $np --split-input: the factors are not one process's"
      # --layout sharded: each rank holds its users' rows of U, the item systems are summed over
      # MPI and U is gathered at the end: one process's factors to rounding, not bit for bit.
      mpirun $over -np $np "$mfact" "${als[@]}" --layout sharded --output-u "$base/sh.u" \
        --output-v "$base/sh.v" >"$base/sh.out" 2>/tmp/mfact-cli-err.$$ ||
        fail "als --layout sharded under mpirun -np $np: $(cat /tmp/mfact-cli-err.$$)"
      for side in u v; do
        paste -d' ' "$base/one.$side" "$base/sh.$side" | awk '{
            n = NF / 2
            for (i = 1; i <= n; i++) {
              d = $i - $(i + n); if (d < 0) d = -d; if (d > md) md = d
              a = $i < 0 ? -$i : $i; if (a > m) m = a
            }
          } END { exit !(NR > 0 && md <= 1e-4 * (m > 0 ? m : 1)) }' ||
          fail "mpirun -np $np --layout sharded: $side is not one process's to rounding"
      done
      split_equals u v sgd --backend cpu "$base/train1.txt" --rank 4 --epochs 3 --workers 1
      split_equals x y complete --backend cpu "$base/train1.txt" --rank 3 --max-iterations 10
      split_equals u v ials --backend cpu "$base/train1.txt" --rank 4 --iterations 3
    done
    "$mfact" sgd --backend cpu "$base/train1.txt" --split-input --epochs 1 >/dev/null 2>&1 ||
      fail "--split-input outside a launcher is not the whole file"
    # ials's ranking metrics leave out each user's training items, which no rank holds all of.
    mpirun $over -np 2 "$mfact" ials --backend cpu "$base/train1.txt" --rank 4 --iterations 1 \
      --test-fraction 0.2 --split-input >/dev/null 2>/tmp/mfact-cli-err.$$ &&
      fail "ials --split-input with a test set under mpirun -np 2 succeeded"
    grep -q "fits the factors alone" /tmp/mfact-cli-err.$$ ||
      fail "ials --split-input with a test set: $(cat /tmp/mfact-cli-err.$$)"
    # One rank failing alone (its input missing) ends the job with its message, never a
    # hang: the others wait inside a collective for it (of 2 processes, and of 4).
    for others in 1 3; do
      rc=0
      timeout 120 mpirun $over -np $others "$mfact" "${als[@]}" : -np 1 "$mfact" als --backend cpu \
        "$base/missing.txt" >/dev/null 2>/tmp/mfact-cli-err.$$ || rc=$?
      [ $rc -ne 0 ] || fail "mpirun with one rank's input missing succeeded ($others others)"
      [ $rc -ne 124 ] || fail "mpirun with one rank's input missing hung ($others others)"
      grep -q "missing.txt: cannot open" /tmp/mfact-cli-err.$$ ||
        fail "the failing rank's message was not shown: $(cat /tmp/mfact-cli-err.$$)"
    done
  elif grep -q "built without" /tmp/mfact-cli-err.$$; then
    echo "cli: this mfact has no MPI; mpirun's case skipped"
  else
    fail "als under mpirun -np 2: $(cat /tmp/mfact-cli-err.$$)"
  fi
fi
rm -f /tmp/mfact-cli-err.$$
echo "cli ok"
