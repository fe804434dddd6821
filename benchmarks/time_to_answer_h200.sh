#!/usr/bin/env bash
# Issue 35 on a lent H200 in ONE device call (carry: .whl .devcarry), most important first, an internal
# budget of BUDGET_S seconds (default 450: under 8 minutes with the machine's start):
#   (a) rn-users: a ResNet-18 inference users step (exec, interactive pattern, warm serving replicas):
#       its share of wall time inside measured windows (target >= 85%);
#   (b) adaptive (--budget 150s --precision 0.5) against fixed 3 repeats on Simpletrack: node-minutes and
#       the precision reached per cell;
#   then the dry-run estimates of the three commands, the comparison and the table (tools.time_to_answer).
# Usage (the lead; the argument is where the results folders go, default $OUT/tta):
#   run(command="bash benchmarks/time_to_answer_h200.sh \"$OUT/tta\"", carry=[".whl", ".devcarry"], timeout_s=600)
# STEPS="adaptive fixed" runs only those steps (a second call when the first was short of time).
set -u
T0=$(date +%s); BUDGET_S=${BUDGET_S:-450}
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
if [ "${INSTALL:-1}" = 1 ] && [ -d .whl ]; then  # INSTALL=0: a machine that has the packages (a CPU check)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD/src:$PWD PYTHONUNBUFFERED=1 XSUITE_ALLOW_KERNEL_COMPILATION=1 SHAREBENCH_CACHE=/tmp/sbcache
A=${1:-${OUT:-/tmp/out}/tta}; mkdir -p "$A"; LHC=${LHC:-.devcarry/lhc_simpletrack_7tev.json.gz}
DEVICE=${DEVICE:-cuda:0}
step() {  # name, seconds at most, command...; its wall time (start, end, status) into walls.csv
    local name=$1 t=$2; shift 2
    case " ${STEPS:-$name} " in *" $name "*) ;; *) return ;; esac
    local l; l=$(left)
    if [ "$l" -lt 30 ]; then echo "== $name: skipped, $l s left" | tee -a "$A/log.txt"; return; fi
    [ "$t" -gt "$l" ] && t=$l
    echo "== $name ($(date -u +%H:%M:%S), at most $t s): $*" | tee -a "$A/log.txt" >> "$A/commands.txt"
    local a; a=$(date +%s.%N)
    timeout "$t" "$@" 2>&1 | tee -a "$A/log.txt" | tail -n 12
    echo "$name,$a,$(date +%s.%N),${PIPESTATUS[0]}" >> "$A/walls.csv"
}
[ -f "$A/walls.csv" ] || echo "step,start,end,status" > "$A/walls.csv"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,uuid,driver_version,mig.mode.current,compute_mode --format=csv | tee "$A/gpu.csv"
SB=(python3 -m sharebench run --device "$DEVICE" --no-progress)
RN=(--engine exec --exec "python3 -m sharebench.workloads.infer" --exec-name resnet18-infer-b8 --work 8
    --pattern interactive:burst=5,think=0.1 --bursts "${RN_BURSTS:-200}" --modes "${MODES:-exclusive,timeslice:2,mps:2}"
    --repeats 2 --warmup-repeats 0)
ST=(--lattice "$LHC" --particles "${ST_PARTICLES:-5e6,1e7}" --turns 1 --modes "${MODES:-exclusive,timeslice:2,mps:2}"
    --warmup-repeats 1 --no-probe)
AD=(--budget "${AD_BUDGET:-150s}" --precision 0.5 --max-repeats 10); FX=(--repeats 3)
step rn-users 190 "${SB[@]}" "${RN[@]}" --out "$A/rn-users"
[ -d "$A/rn-users" ] && python3 -m tools.cell_overhead "$A/rn-users" | tee "$A/rn-users-overhead.txt"
step adaptive 165 "${SB[@]}" "${ST[@]}" "${AD[@]}" --out "$A/adaptive"
step fixed 110 "${SB[@]}" "${ST[@]}" "${FX[@]}" --out "$A/fixed"
for s in rn-users adaptive fixed; do   # the estimates --dry-run gives for the same commands
    [ "$(left)" -lt 15 ] && break
    case $s in rn-users) x=("${RN[@]}");; adaptive) x=("${ST[@]}" "${AD[@]}");; fixed) x=("${ST[@]}" "${FX[@]}");; esac
    timeout 30 "${SB[@]}" "${x[@]}" --dry-run --out "$A/dry-$s" > "$A/dry_$s.txt" 2>&1
done
python3 -m tools.time_to_answer "$A" | tee "$A/time_to_answer.md"
echo "done in $(( $(date +%s) - T0 )) s" | tee -a "$A/log.txt"
