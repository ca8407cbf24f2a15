#!/usr/bin/env bash
# Everything a lent GPU session runs (issues 37, 50), as one prepared command of at most 9
# minutes, so that a second try fits in 15 minutes of device time. Needs only the machine's
# python3 with torch (and pytest, for the tests); no DGL, no Jupyter, no internet.
#
#   bash bench/gpu_session.sh [OUTDIR]        # OUTDIR default: $OUT, else /tmp/gpu_session
#
# 1. every CUDA-marked test (pytest -m cuda), the Grappa worker's captured step first
#    (tests/grappa/test_grappa_exchange.py: the step, exchange included, as one CUDA Graph);
# 2. bench/gpu_check.py at a 120 s budget (captured / dynamic / torch.compile of the model /
#    the whole step compiled and captured, Engine(mode="compiled"), the execution fraction,
#    kernels per replay, captured vs static parameters), written as
#    bench/results/gpu_check_cuda_session.json (the full-budget file, gpu_check_cuda.json, is
#    bench/gpu_check.sh's and stays as it is);
# 3. Lab 8 run with the instructor's solutions (zg_course/grade.py: its cells in one process,
#    as a kernel runs them), Part C's capture included;
# 4. bench/floor.py on the GPU at its --quick size: the floor and the pipelines' multiples.
# Each part has its own time limit; a part that fails does not stop the next one. The JSON
# files, the logs and a summary land in OUTDIR; the exit status is 1 if any part failed.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="${1:-${OUT:-/tmp/gpu_session}}"
mkdir -p "$out"
py="${PYTHON:-python3}"
export PYTHON="$py" PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export OMP_WAIT_POLICY=PASSIVE PYTHONHASHSEED=0
cd "$root"
status=0
part() {  # part NAME SECONDS COMMAND...: run one part under its limit, log it, note its status
  local name="$1" limit="$2"
  shift 2
  local t0=$SECONDS
  echo "== $name (limit ${limit} s): $*"
  timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 40 "$out/$name.log"
  echo "== $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
  [ "$rc" -eq 0 ] || status=1
}
{
  echo "gpu_session: $(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null || echo no-git)"
  "$py" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
} | tee "$out/summary.txt"

if ! "$py" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" && [ -z "${FORCE:-}" ]; then
  echo "gpu_session: no CUDA GPU here; this is the GPU session's script (FORCE=1 runs it anyway)"
  exit 2
fi
first=tests/grappa/test_grappa_exchange.py
others=$(grep -l "mark.cuda" tests/*/test_*.py | grep -v "^$first\$")
part cuda_tests 200 "$py" -m pytest -q -p no:cacheprovider -m cuda "$first" $others
part gpu_check 150 "$py" bench/gpu_check.py --budget 120 --name gpu_check_cuda_session
part lab8 60 "$py" -m zg_course.grade labs/source/08_capture/08_capture.ipynb --json "$out/lab8.json"
part floor 90 "$py" bench/floor.py --quick --name floor_cuda_quick --no-dgl
for f in gpu_check_cuda_session.json floor_cuda_quick.json; do
  [ -f "bench/results/$f" ] && cp "bench/results/$f" "$out/"
done
echo "gpu_session: exit $status" | tee -a "$out/summary.txt"
exit "$status"
