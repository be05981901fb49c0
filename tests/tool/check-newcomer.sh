#!/usr/bin/env bash
# What a newcomer does with a recommender's data (issue 44, "Done when"): a CSV with string
# ids and a header, a time split whose test part has users and items the training part
# lacks; train, save, load in a new process, predict and recommend in the file's ids, from
# the tool and from Python, every number checked against the model that trained it.
#   check-newcomer.sh MFACT [PYTHON]
# The data is generated here from a planted model (so the script always runs). The Python
# half needs a PYTHON that imports mfact (or does with MFACT_LIBRARY and PYTHONPATH) and
# NumPy/SciPy; without one it says so and checks the tool alone.
set -uo pipefail
mfact=$1
py=${2:-python3}
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# A planted rank-3 model: 80 users named like accounts ("u-0007", one "smith, jo" that
# needs quotes), 50 items with sparse ids ("tt0193609"); ratings over 100 days. The split
# is by time: the last 20 days are the test set, and the users and items that first appear
# then (a fifth of each) are unseen by training.
python3 - <<'EOF' || fail "generating the data"
import csv, random
r = random.Random(44)
users = ["smith, jo"] + ["u-%04d" % (7 * u + 3) for u in range(79)]
items = ["tt%07d" % (193609 - 977 * i) for i in range(50)]
late_users, late_items = set(users[-16:]), set(items[-10:])
U = {u: [r.gauss(0, 0.6) for _ in range(3)] for u in users}
V = {i: [r.gauss(0, 0.6) for _ in range(3)] for i in items}
rows = []
for u in users:
    for i in items:
        if r.random() < 0.35:
            late = u in late_users or i in late_items
            day = r.randint(81, 100) if late else r.randint(1, 100)
            x = 3.5 + sum(a * b for a, b in zip(U[u], V[i])) + r.gauss(0, 0.3)
            rows.append((u, i, round(min(5.0, max(1.0, x)), 1), day))
rows.sort(key=lambda t: t[3])
with open("train.csv", "w", newline="") as tr, open("test.csv", "w", newline="") as te:
    a, b = csv.writer(tr), csv.writer(te)
    for w in (a, b):
        w.writerow(["userId", "movieId", "rating", "timestamp"])
    for t in rows:
        (b if t[3] > 80 else a).writerow(t)
EOF
ids=(--user-col userId --item-col movieId --rating-col rating)
grep -q '^"smith, jo",' train.csv || fail "the generator wrote no quoted id"

# -- the tool: train with a test set, save; then predict and recommend in new processes
out=$("$mfact" als --backend cpu train.csv "${ids[@]}" --test test.csv --rank 3 --iterations 8 \
  --save-model als.mfm --output-v items.txt 2>/dev/null) || fail "mfact als exited $?"
echo "$out"
unseen=$(echo "$out" | awk '/^test ratings unseen /{print $4}')
[ -n "$unseen" ] && [ "$unseen" -gt 0 ] || fail "no unseen test ratings counted: $out"
items=$(echo "$out" | awk '/^items /{print $2}')
[ "$items" -le 50 ] && [ "$(wc -l <items.txt)" -eq "$items" ] || fail "items: $items"
grep -q "^tt0193609 " items.txt || fail "--output-v does not name the items by their ids"
rmse=$(echo "$out" | awk '/^test RMSE [0-9]/{print $3}')
"$mfact" predict --backend cpu als.mfm test.csv >pred.txt || fail "mfact predict exited $?"
[ "$(wc -l <pred.txt)" -eq "$(($(wc -l <test.csv) - 1))" ] || fail "predict: not one line a pair"
# the predictions' RMSE is the training run's test RMSE over all test ratings, unseen too
paste -d, pred.txt <(tail -n +2 test.csv | python3 -c '
import csv, sys
for row in csv.reader(sys.stdin): print(row[2])') |
  awk -F, -v want="$rmse" '{ d = $1 - $2; s += d * d; n++ }
    END { got = sqrt(s / n); exit !(got - want < 2e-6 * want && want - got < 2e-6 * want) }' ||
  fail "predict's RMSE is not the training run's test RMSE $rmse"
tail -n +2 test.csv | python3 -c '
import csv, sys
seen = set()
for row in csv.reader(sys.stdin):
    if row[0] not in seen:
        seen.add(row[0]); print(row[0])' >who.txt
"$mfact" recommend --backend cpu --model als.mfm --users who.txt --exclude train.csv "${ids[@]}" \
  --top 5 >recs.txt || fail "mfact recommend --model exited $?"
[ "$(awk '{print $1}' recs.txt | uniq | wc -l)" -eq "$(wc -l <who.txt)" ] ||
  fail "recommend: not one list per user of who.txt"
grep -q '^tt' recs.txt && fail "recommend: a line does not start with a user id"
awk '{ if ($(NF - 1) !~ /^tt[0-9]+$/) bad++ } END { exit bad > 0 }' recs.txt ||
  fail "recommend: items not named by their ids: $(head -3 recs.txt)"
echo "tool: $(wc -l <pred.txt) predictions ($unseen unseen), test RMSE $rmse, $(wc -l <recs.txt) list entries"

# -- Python: the same data through mfact.read, a model saved here and loaded in a new process
if ! "$py" -c 'import mfact, numpy, scipy' 2>/dev/null; then
  echo "newcomer: $py cannot import mfact with NumPy and SciPy; the Python half is skipped"
  echo "newcomer ok (tool only)"
  exit 0
fi
"$py" - "$mfact" <<'EOF' || fail "the Python half"
import csv, subprocess, sys
import numpy as np
import mfact
cli = sys.argv[1]
ids = dict(user_col="userId", item_col="movieId", rating_col="rating")
ctx = mfact.Context(backend="cpu")
R = mfact.read("train.csv", ctx=ctx, **ids)
T = mfact.read("test.csv", ctx=ctx, id_maps=R, **ids)
assert "smith, jo" in R.user_ids and all(u.startswith("u-") for u in R.user_ids if "," not in u)
assert len(T.user_ids) > len(R.user_ids) and len(T.item_ids) > len(R.item_ids), "no unseen ids"
test = list(csv.reader(open("test.csv")))[1:]
users, items = [t[0] for t in test], [t[1] for t in test]
truth = np.array([float(t[2]) for t in test], np.float32)

# The tool's model, loaded here: its predictions are the tool's, and its RMSE on the test
# set read with the training ids is the tool's test RMSE.
tool = mfact.load("als.mfm", ctx=ctx)
assert tool.user_ids == R.user_ids and tool.item_ids == R.item_ids, "the tool's ids"
mine = tool.predict(users, items, ids=True)
theirs = np.loadtxt("pred.txt", dtype=np.float32)
assert np.array_equal(mine, theirs), "the tool's predictions differ from Python's"
assert abs(tool.rmse(T) - float(np.sqrt(np.mean((mine - truth) ** 2)))) < 1e-6

# Python's own fit, saved and loaded in a new process: the same numbers, bit for bit
model = mfact.ALS(rank=3, iterations=8, ctx=ctx).fit(R)
pred = model.predict(users, items, ids=True)
rmse = float(np.sqrt(np.mean((pred - truth) ** 2)))
assert rmse < 0.75, f"test RMSE {rmse} (the planted noise is 0.3, the clipping adds)"
model.save("py.mfm")
code = r"""
import sys, numpy as np, mfact
m = mfact.load("py.mfm", ctx=mfact.Context(backend="cpu"))
users, items = sys.argv[1].split("\t"), sys.argv[2].split("\t")
np.save("again.npy", m.predict(users, items, ids=True))
r, s = m.recommend(users[:3], N=5, filter_already_liked_items=False, ids=True)
print(repr([list(x) for x in r]))
"""
out = subprocess.run([sys.executable, "-c", code, "\t".join(users), "\t".join(items)],
                     check=True, capture_output=True, text=True).stdout
assert np.array_equal(np.load("again.npy"), pred), "predictions after loading in a new process"
unfiltered, _ = model.recommend(users[:3], N=5, filter_already_liked_items=False, ids=True)
assert eval(out) == [list(x) for x in unfiltered], "recommendations after loading"
# and the tool reads Python's file: mfact predict gives the same predictions
tool_pred = subprocess.run([cli, "predict", "--backend", "cpu", "py.mfm", "test.csv"], check=True,
                           capture_output=True, text=True).stdout.split()
assert np.array_equal(np.array(tool_pred, np.float32), pred), "mfact predict on Python's model"
print(f"python: {len(pred)} predictions in the file's ids, test RMSE {rmse:.4f}; "
      f"tool and Python agree, bit for bit, both ways")
EOF
echo "newcomer ok"
