#!/usr/bin/env bash
# The GPU check in one command: needs only a recent torch and numpy (no DGL, no internet).
#   bash bench/gpu_check.sh [--budget SECONDS] [other bench/gpu_check.py flags]
# 1. bench/gpu_check.py writes bench/results/gpu_check_<cuda|cpu>.json row by row (default
#    budget 300 s);
# 2. then the CUDA-marked tests run, if pytest is installed (their files need nothing else).
# Exits non-zero if either part failed.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
py="${PYTHON:-python3}"
"$py" "$here/gpu_check.py" "$@"
check=$?
tests=0
if "$py" -c "import pytest" >/dev/null 2>&1; then
  files=$(grep -l "mark.cuda" "$here"/../tests/*/test_*.py)
  echo "== CUDA-marked tests: $files"
  # -p no:cacheprovider: leave nothing behind; -m cuda: only the GPU tests.
  (cd "$here/.." && "$py" -m pytest -q -p no:cacheprovider -m cuda $files)
  tests=$?
  [ "$tests" -eq 5 ] && tests=0          # 5: nothing collected (no CUDA-marked test ran)
else
  echo "== pytest is not installed: the CUDA-marked tests were not run"
fi
[ "$check" -eq 0 ] && [ "$tests" -eq 0 ]
