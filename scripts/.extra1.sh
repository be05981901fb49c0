#!/bin/bash
# quick GPU quality on the real sets with defaults and --auto
B=build-device/cli/mfact
for f in .deps/data/ratings/ml-100k.tsv .deps/data/ratings/filmtrust.txt; do
  for cmd in als sgd; do for extra in "" "--auto"; do
    r=$($B $cmd $f --test-fraction 0.2 --seed 1 --backend cuda $extra 2>/dev/null | grep -E "^(test RMSE|lambda|seconds) " | tr '\n' ' ')
    echo "$(basename $f) $cmd $extra: $r"
  done; done
done
