#!/usr/bin/env bash
# Issue 23 on a lent H200, through the device tool (carry: .whl .devcarry; see ../timeslice/run.sh):
#   BUDGET_S=540 bash results/patterns/run.sh        (writes into $OUT)
# Simpletrack (the real LHC line, 1 M particles, a unit = 1 turn) and ResNet-18 inference (batch 8, a unit =
# one batch): interactive users alone (1-8 per GPU under time-slicing and MPS), an interactive user beside
# batch neighbours, and serving at fixed Poisson rates. Each step is bounded; what does not fit is skipped.
set -u
T0=$(date +%s); BUDGET_S=${BUDGET_S:-540}
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
tar xzf .devcarry/madng_libs.tgz -C .devcarry/site
export PYTHONPATH=/tmp/site:$PWD/.devcarry/site:$PWD/src:$PWD PYTHONUNBUFFERED=1 XSUITE_ALLOW_KERNEL_COMPILATION=1
export SHAREBENCH_CACHE=/tmp/sbcache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LHC=.devcarry/lhc_simpletrack_7tev.json.gz
step() {  # name, seconds at most, command...
    local name=$1 t=$2; shift 2
    case " ${STEPS:-$name} " in *" $name "*) ;; *) return ;; esac
    local l; l=$(left)
    if [ "$l" -lt 25 ]; then echo "== $name: skipped, $l s left" | tee -a "$OUT/log.txt"; return; fi
    [ "$t" -gt "$l" ] && t=$l
    echo "== $name ($(date -u +%H:%M:%S), at most $t s): $*" | tee -a "$OUT/log.txt" >> "$OUT/commands.txt"
    timeout "$t" "$@" 2>&1 | tee -a "$OUT/log.txt" | tail -n 30
}
nvidia-smi --query-gpu=name,uuid,driver_version,mig.mode.current,compute_mode --format=csv | tee "$OUT/gpu.csv"
SB=(python3 -m sharebench run --device cuda:0 --no-progress)
ST=(--lattice "$LHC" --particles 1e6 --turns 1 --warmup-repeats 0)
U=interactive:burst=1,think=0.2
step st-users 150 "${SB[@]}" "${ST[@]}" --repeats 2 --bursts 20 --stop-after 110 --pattern $U \
    --modes exclusive,timeslice:2,timeslice:4,timeslice:8,mps:2,mps:4,mps:8 --out "$OUT/st-users"
step st-beside 90 "${SB[@]}" "${ST[@]}" --repeats 2 --bursts 20 --stop-after 60 --pattern $U --neighbours batch \
    --modes exclusive,timeslice:2,timeslice:4,mps:2,mps:4 --out "$OUT/st-beside"
step st-serve 80 "${SB[@]}" "${ST[@]}" --repeats 1 --bursts 40 --stop-after 55 --pattern serve:rate=3,size=1 \
    --modes exclusive,timeslice:2,mps:2 --out "$OUT/st-serve-3"
RN=(--engine exec --exec "python3 -m sharebench.workloads.infer" --exec-name resnet18-infer-b8 --work 8 --warmup-repeats 0)
step rn-users 100 "${SB[@]}" "${RN[@]}" --repeats 1 --bursts 30 --stop-after 70 --pattern interactive:burst=5,think=0.1 \
    --modes exclusive,timeslice:2,timeslice:4,mps:2,mps:4 --out "$OUT/rn-users"
step rn-beside 70 "${SB[@]}" "${RN[@]}" --repeats 1 --bursts 30 --stop-after 45 --pattern interactive:burst=5,think=0.1 \
    --neighbours batch --modes exclusive,timeslice:2,mps:2 --out "$OUT/rn-beside"
echo "done in $(( $(date +%s) - T0 )) s" | tee -a "$OUT/log.txt"
# The device tool brings back a limited number of files, and a later call starts with an empty $OUT: pack every
# folder into one archive in this same call (2026-12-03: the folders were left loose, only 8 files came back and
# the rest was lost when the next call emptied $OUT).
(cd "$OUT" && tar czf patterns.tgz --exclude='*.svg' --exclude=report.html --exclude=.sharebench.lock \
    --exclude='*/workers' */ && rm -rf -- */)
