#!/usr/bin/env bash
# The GPU check in one line: needs only a recent torch (no DGL, no internet). See bench/gpu_check.py.
exec "${PYTHON:-python3}" "$(dirname "$0")/gpu_check.py" "$@"
