#!/usr/bin/env bash
# Issue 29 on a lent H200, through the device tool (carry: .whl .devcarry):
#   bash results/timeslice/run.sh        (writes into $OUT)
# .devcarry/site: xtrack, xobjects, xpart, xdeps (pure Python, copied from the project's venv);
# .whl: cffi, pycparser, lark for cp312; .devcarry/lhc_simpletrack_7tev.json.gz: the real LHC line.
set -u
T0=$(date +%s); BUDGET_S=${BUDGET_S:-530}
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/.devcarry/site:$PWD/src:$PWD/tests PYTHONUNBUFFERED=1 XSUITE_ALLOW_KERNEL_COMPILATION=1
export SHAREBENCH_CACHE=/tmp/sbcache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LHC=.devcarry/lhc_simpletrack_7tev.json.gz
SB="python3 -m sharebench"
step() {  # name, seconds at most, command...; STEPS (a space list of names) runs only those
    local name=$1 t=$2; shift 2
    case " ${STEPS:-$name} " in *" $name "*) ;; *) return ;; esac
    local l; l=$(left)
    if [ "$l" -lt 20 ]; then echo "== $name: skipped, $l s left" | tee -a "$OUT/log.txt"; return; fi
    [ "$t" -gt "$l" ] && t=$l
    echo "== $name ($(date -u +%H:%M:%S), at most $t s): $*" | tee -a "$OUT/log.txt" >> "$OUT/commands.txt"
    timeout "$t" "$@" 2>&1 | tee -a "$OUT/log.txt" | tail -n 25
}
nvidia-smi --query-gpu=name,uuid,driver_version,mig.mode.current,compute_mode,clocks.max.sm --format=csv | tee "$OUT/gpu.csv"
step tests 90 python3 -m pytest -p no:cacheprovider -q -rs tests/telemetry/test_timeslice_probe.py
step probe-one 40 $SB probe timeslice --processes 2,4 --seconds 3 --out "$OUT/probe_one.json"
step probe-full 40 $SB probe timeslice --processes 2,4 --seconds 3 --grid full --out "$OUT/probe_full.json"
step split-simpletrack-10M 130 $SB probe split --lattice "$LHC" --particles 1e7 --turns 1 --repeats "${REPEATS:-3}" --probe-seconds 3 \
    --out "$OUT/split_simpletrack_10M_1turn.json"
step split-resnet18 100 $SB probe split --exec "python3 -m sharebench.workloads.train --steps 100 --warmup-steps 10" \
    --exec-name resnet18-fp32 --work 128 --repeats "${RESNET_REPEATS:-${REPEATS:-3}}" --probe-seconds 3 --out "$OUT/split_resnet18_fp32.json"
step split-simpletrack-5M 120 $SB probe split --lattice "$LHC" --particles 5e6 --turns 1 --repeats 3 --probe-seconds 3 \
    --out "$OUT/split_simpletrack_5M_1turn.json"
echo "done in $(( $(date +%s) - T0 )) s" | tee -a "$OUT/log.txt"
