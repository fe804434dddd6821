#!/usr/bin/env bash
# Issue 34, Build item 3: the time-slicing loss against its prediction beside the light probe and beside a
# heavy neighbour (`sharebench probe split --neighbour light,heavy:128`), on a lent H200 in ONE device call:
#   device run: BUDGET_S=450 bash benchmarks/timeslice_split_h200.sh [FOLDER]   (carry: .whl .devcarry)
# FOLDER (default $OUT/timeslice-split) gets tables/timeslice_split.csv (analysis.timeslice_split's
# SPLIT_COLUMNS: slice_ms, switch_ms, switch_idle_pct, in_slice_rate, loss_pct, predicted_loss_pct, evict_ms,
# unexplained_pts ... one row per workload and heavy neighbour), one JSON per workload, gpu.csv, clocks.csv,
# commands.txt and log.txt. Steps run most important first; a step starts only when its estimate fits in
# what is left of BUDGET_S, so the last is dropped rather than killed (STEPS="st-10turn" runs only it).
# Without a GPU (CPU check here): DRY_RUN=1 runs every sharebench command with --dry-run.
set -u
T0=$(date +%s)
BUDGET_S=${BUDGET_S:-450}
OUT=${OUT:-/tmp/out}
S=${1:-$OUT/timeslice-split}
mkdir -p "$S/tables"
TABLE=$S/tables/timeslice_split.csv
LHC=.devcarry/lhc_simpletrack_7tev.json.gz
DRY=()
[ -n "${DRY_RUN:-}" ] && DRY=(--dry-run)
left() { echo $((BUDGET_S - ($(date +%s) - T0))); }

step() { # name, estimated seconds, command...
    local name=$1 est=$2 l
    shift 2
    case " ${STEPS:-$name} " in *" $name "*) ;; *) return 0 ;; esac
    l=$(left)
    if [ "$est" -gt "$l" ]; then
        echo "== $name: skipped, needs ~$est s, $l s left (run it alone: STEPS=$name)" | tee -a "$S/log.txt"
        return 0
    fi
    echo "== $name ($(date -u +%H:%M:%S), ~$est s, $l s left): $*" | tee -a "$S/log.txt" >>"$S/commands.txt"
    timeout "$l" "$@" 2>&1 | tee -a "$S/log.txt" | tail -n 20
    echo "== $name: exit ${PIPESTATUS[0]} after $(($(date +%s) - T0)) s" | tee -a "$S/log.txt"
}

if [ -z "${DRY_RUN:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD/src:$PWD:$PWD/tests
    nvidia-smi --query-gpu=name,uuid,driver_version,mig.mode.current,compute_mode,clocks.max.sm,clocks.max.mem \
        --format=csv | tee "$S/gpu.csv"
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv,noheader \
        -lms 250 >"$S/clocks.csv" 2>/dev/null &
    SMI=$!
else
    export PYTHONPATH=$PWD/src:$PWD:$PWD/tests
    SMI=
fi
export PYTHONUNBUFFERED=1 XSUITE_ALLOW_KERNEL_COMPILATION=1 SHAREBENCH_CACHE=${SHAREBENCH_CACHE:-/tmp/sbcache}
PY=${PYTHON:-python3}
SPLIT=("$PY" -m sharebench probe split --device cuda:0 --neighbour light,heavy:128 --probe-seconds 2
    --table "$TABLE" "${DRY[@]}")

# 1. the GPU-marked tests of the neighbours (a heavy pair alternates; Simpletrack beside heavy:64)
step gpu-tests 45 "$PY" -m pytest -p no:cacheprovider -q -rs -m gpu -k neighbour \
    tests/telemetry/test_timeslice_probe.py
# 2-4. Simpletrack at 5 M and 15 M x 1 turn, ResNet-18 training: 3 repeats each (intervals need 3)
step st-5M 110 "${SPLIT[@]}" --lattice "$LHC" --particles 5e6 --turns 1 --repeats 3 --out "$S/st_5M_1turn.json"
step st-15M 150 "${SPLIT[@]}" --lattice "$LHC" --particles 1.5e7 --turns 1 --repeats 3 --out "$S/st_15M_1turn.json"
step rn18-train 130 "${SPLIT[@]}" --exec "$PY -m sharebench.workloads.train --steps 40 --warmup-steps 5" \
    --exec-name resnet18-train-b128 --work 128 --repeats 3 --out "$S/resnet18_train.json"
# 5. Simpletrack 10 M x 10 turns (T1 ~14 s: ~150 s a repeat); left for a second call when the budget is spent
step st-10turn 300 "${SPLIT[@]}" --lattice "$LHC" --particles 1e7 --turns 10 --repeats 2 --out "$S/st_10M_10turn.json"

[ -n "$SMI" ] && kill "$SMI" 2>/dev/null
COLS=engine,particles,turns,neighbour,slice_ms,switch_ms,switch_idle_pct,in_slice_rate,in_slice_rate_light,\
refill_light_ms,evict_ms,loss_pct,predicted_loss_pct,predicted_light_pct,unexplained_pts,unexplained_ci_low,\
unexplained_ci_high
[ -f "$TABLE" ] && "$PY" -c 'import sys, pandas as pd; t = pd.read_csv(sys.argv[1]); c = sys.argv[2].split(",")
print(t[[x for x in c if x in t]].round(3).to_string(index=False))' "$TABLE" "$COLS" | tee -a "$S/log.txt"
echo "done in $(($(date +%s) - T0)) s; table: $TABLE" | tee -a "$S/log.txt"
