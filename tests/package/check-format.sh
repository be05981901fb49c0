#!/usr/bin/env bash
# Every C, CUDA and header file of the project follows .clang-format.
set -euo pipefail
src=$1
command -v clang-format >/dev/null || { echo "clang-format not found: skipped"; exit 77; }
cd "$src"
files=$(git ls-files --cached --others --exclude-standard '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null || find include src cli tests examples bench -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh')
clang-format --dry-run --Werror $files
echo "format: $(echo "$files" | wc -w) files clean"
