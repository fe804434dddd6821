#!/usr/bin/env bash
# Issue 35 on a lent H200, one device call (carry: .whl .devcarry), internal budget BUDGET_S (default 480 s):
#   (1) the dry run of the plan's ResNet-18 users step (benchmarks/plans/patterns.toml, step rn-users: 9 modes x
#       3 repeats, 30 bursts of interactive:burst=5,think=0.1, batch 8), as one `sharebench run`, BEFORE it runs;
#   (2) that step, timed from process start to exit (walls.csv): its share of wall time in measured windows
#       (target >= 85%) and the dry run's error (target within 30%);
#   (3) if time is left: adaptive (--budget 120s --precision 0.5) against fixed 3 repeats on ResNet-18 users
#       (exclusive, timeslice:2, mps:2): the comparison the Simpletrack one (2026-12-04 call 3) left open;
#   then python -m tools.cell_overhead and python -m tools.time_to_answer on the folder.
# Usage (the lead):
#   run(command="bash benchmarks/h200_2026-12-04_call4.sh \"$OUT/tta\"", carry=[".whl", ".devcarry"], timeout_s=600)
# A CPU check of the flow: INSTALL=0 DEVICE=cpu EXEC="python3 tests/support/contended.py" PLAN_MODES=exclusive,timeslice:2
#   HEAD_MODES=exclusive,timeslice:2 PATH=.venv/bin:$PATH bash benchmarks/h200_2026-12-04_call4.sh /tmp/c4
# The wheels are installed WITH byte-compilation (a site's pip install compiles too): imports start as they would.
set -u
T0=$(date +%s); BUDGET_S=${BUDGET_S:-480}
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
if [ "${INSTALL:-1}" = 1 ] && [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD/src:$PWD PYTHONUNBUFFERED=1 XSUITE_ALLOW_KERNEL_COMPILATION=1 SHAREBENCH_CACHE=/tmp/sbcache
python3 -m compileall -q src > /dev/null 2>&1
A=${1:-${OUT:-/tmp/out}/tta}; mkdir -p "$A"
DEVICE=${DEVICE:-cuda:0}
step() {  # name, seconds at most, command...; its wall time (start, end, status) into walls.csv
    local name=$1 t=$2; shift 2
    case " ${STEPS:-$name} " in *" $name "*) ;; *) return ;; esac
    local l; l=$(left)
    if [ "$l" -lt 40 ]; then echo "== $name: skipped, $l s left" | tee -a "$A/log.txt"; return; fi
    [ "$t" -gt "$l" ] && t=$l
    echo "== $name ($(date -u +%H:%M:%S), at most $t s): $*" | tee -a "$A/log.txt" >> "$A/commands.txt"
    local a; a=$(date +%s.%N)
    timeout "$t" "$@" 2>&1 | tee -a "$A/log.txt" | tail -n 8
    echo "$name,$a,$(date +%s.%N),${PIPESTATUS[0]}" >> "$A/walls.csv"
}
[ -f "$A/walls.csv" ] || echo "step,start,end,status" > "$A/walls.csv"
nvidia-smi --query-gpu=name,uuid,driver_version,mig.mode.current,compute_mode --format=csv | tee "$A/gpu.csv"
SB=(python3 -m sharebench run --device "$DEVICE" --no-progress)
RN=(--engine exec --exec "${EXEC:-python3 -m sharebench.workloads.infer}" --exec-name resnet18-infer-b8 --work 8 --turns 1
    --pattern interactive:burst=5,think=0.1 --bursts 30 --slo 2 --warmup-repeats 0)
PLAN=(--modes "${PLAN_MODES:-exclusive,timeslice:2,timeslice:4,timeslice:8,mps:2,mps:4,mps:8,mig-emulated:3x2g.35gb,mig-emulated:7x1g.18gb}"
      --repeats 3)
HEAD=(--modes "${HEAD_MODES:-exclusive,timeslice:2,mps:2}")
# (1) the estimate first, then (2) the step
timeout 120 "${SB[@]}" "${RN[@]}" "${PLAN[@]}" --dry-run --out "$A/dry-rn-plan" > "$A/dry_rn-plan.txt" 2>&1
cat "$A/dry_rn-plan.txt" | tail -n 3
step rn-plan 330 "${SB[@]}" "${RN[@]}" "${PLAN[@]}" --out "$A/rn-plan"
[ -d "$A/rn-plan" ] && python3 -m tools.cell_overhead "$A/rn-plan" | tee "$A/rn-plan-overhead.txt"
# (3) adaptive against fixed on ResNet-18 users (the dry runs first)
timeout 60 "${SB[@]}" "${RN[@]}" "${HEAD[@]}" --budget 120s --precision 0.5 --max-repeats 8 --dry-run \
    --out "$A/dry-adaptive" > "$A/dry_adaptive.txt" 2>&1
step adaptive 150 "${SB[@]}" "${RN[@]}" "${HEAD[@]}" --budget 120s --precision 0.5 --max-repeats 8 --out "$A/adaptive"
timeout 60 "${SB[@]}" "${RN[@]}" "${HEAD[@]}" --repeats 3 --dry-run --out "$A/dry-fixed" > "$A/dry_fixed.txt" 2>&1
step fixed 110 "${SB[@]}" "${RN[@]}" "${HEAD[@]}" --repeats 3 --out "$A/fixed"
python3 -m tools.time_to_answer "$A" | tee "$A/time_to_answer.md"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$A/gpu_processes_after.csv" 2>&1
ps -eo pid,ppid,etimes,args | grep -E "sharebench|infer" | grep -v grep > "$A/processes_after.txt"
echo "done in $(( $(date +%s) - T0 )) s" | tee -a "$A/log.txt"
