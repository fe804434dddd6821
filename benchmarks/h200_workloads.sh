#!/usr/bin/env bash
# Workloads compared on the lent H200 (docs/results/h200-workloads/): Simpletrack, xtrack and the
# ResNet-18 training workload (FP32 and mixed precision) under the same sharing modes, each into its own
# results folder (OUT_DIR/<workload>), then combined into OUT_DIR/results, whose report's workloads table
# compares them; plus an Nsight Compute profile of each workload (registers per thread, achieved
# occupancy, kernel time):
#   bash benchmarks/h200_workloads.sh OUT_DIR [STOP_AFTER_S]
# then copy OUT_DIR to docs/results/h200-workloads/. A folder that holds results is continued, so the
# campaign can be spread over several device calls (STOP_AFTER_S per call); finished workloads are
# skipped (each workload's cells are its own: --resume skips only the cells it already measured).
# Expects PYTHONPATH with sharebench + xsuite wheels, torch (on the GPU machine), and the
# real LHC line at $LHC. Modes: no MIG (the card's MIG mode is never changed here); the SM-share
# partitions are MPS clients limited to an active-thread percentage (mps:N@PCT).
# Every knob is an environment variable, so a CPU dry run is possible:
#   DEV=cpu WARM_PARTICLES=100 MODES=exclusive,timeslice:2,partition:2 ST_PARTICLES=2000 XT_PARTICLES=500 TRAIN_WORK=2 \
#   TRAIN_ARGS="--steps 2 --warmup-steps 1 --image-size 32" NCU=none REPEATS=1 bash benchmarks/h200_workloads.sh /tmp/w
set -u
OUT=${1:?out dir}
STOP=${2:-}
DEV=${DEV:-cuda:0}
LHC=${LHC:-.devcarry/lhc_simpletrack_7tev.json.gz}
MODES=${MODES:-exclusive,timeslice:2,timeslice:4,mps:2,mps:4,mps:2@50,mps:4@25}
XT_MODES=${XT_MODES:-$MODES}
REPEATS=${REPEATS:-3}
ST_PARTICLES=${ST_PARTICLES:-1e7}          # 1 turn of the real LHC line: about 1.4 s alone on the H200
ST_TURNS=${ST_TURNS:-1}
XT_PARTICLES=${XT_PARTICLES:-1e6}         # xtrack on the generated ring (2,945 elements)
XT_TURNS=${XT_TURNS:-10}
TRAIN_WORK=${TRAIN_WORK:-128}              # batch size (SHAREBENCH_WORK)
TRAIN_ARGS=${TRAIN_ARGS:---steps 150 --warmup-steps 15}
NCU=${NCU:-ncu}                            # NCU=none: no profiles
PY=${PY:-python3}
SB="$PY -m sharebench"
RES="$OUT/results"   # the combined folder
mkdir -p "$OUT"
T0=$(date +%s)
left() { [ -z "$STOP" ] && return 0; echo $(( STOP - ($(date +%s) - T0) )); }

{ date -u +%Y-%m-%dT%H:%M:%SZ; uname -n
  nvidia-smi --query-gpu=name,uuid,memory.total,driver_version,mig.mode.current --format=csv 2>&1 || true
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1 || true
} >> "$OUT/machine.txt"

# one workload's sweep into its own folder; each command is logged in commands.txt
sweep() {
    local name=$1; shift
    local budget; budget=$(left)
    if [ -n "$STOP" ] && [ "$budget" -le 30 ]; then echo "no time left for: $name" | tee -a "$OUT/log.txt"; return 0; fi
    local dir="$OUT/$name" resume=""
    [ -f "$dir/results.csv" ] && resume=--resume
    local cmd=($SB run --device "$DEV" --repeats "$REPEATS" --warmup-repeats 0 --out "$dir" $resume --no-progress
               ${STOP:+--stop-after "$budget"} "$@")
    printf '%q ' "${cmd[@]}" >> "$OUT/commands.txt"; echo >> "$OUT/commands.txt"
    "${cmd[@]}" 2>&1 | tail -n 4 | tee -a "$OUT/log.txt"
}

# bring the GPU out of idle clocks before the first measured cell
$SB track --device "$DEV" --lattice "$LHC" --particles "${WARM_PARTICLES:-2000000}" --turns 1 >/dev/null 2>&1 || true

sweep simpletrack --modes "$MODES" --lattice "$LHC" --particles "$ST_PARTICLES" --turns "$ST_TURNS"
sweep resnet18-fp32 --modes "$MODES" --engine exec --exec "$PY -m sharebench.workloads.train $TRAIN_ARGS" --exec-name resnet18-fp32 \
    --work "$TRAIN_WORK"
sweep resnet18-amp --modes "$MODES" --engine exec --exec "$PY -m sharebench.workloads.train $TRAIN_ARGS --amp" \
    --exec-name resnet18-amp --work "$TRAIN_WORK"
# xtrack last: every replica builds its kernels (minutes on a machine without Xsuite's prebuilt kernels)
sweep xtrack --modes "$XT_MODES" --engine xtrack --particles "$XT_PARTICLES" --turns "$XT_TURNS" --ready-timeout 900

# Nsight Compute: one exclusive run of each workload, small, every kernel's registers, occupancy and time
if [ "$NCU" != none ] && command -v "$NCU" >/dev/null 2>&1; then
    mkdir -p "$OUT/ncu"
    METRICS=launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum
    prof() {  # name, then the command
        local name=$1; shift
        echo "$NCU --clock-control none --metrics $METRICS --csv $*" >> "$OUT/commands.txt"
        timeout 400 "$NCU" --clock-control none --metrics "$METRICS" --csv "$@" \
            > "$OUT/ncu/$name.csv" 2> "$OUT/ncu/$name.err" || echo "ncu $name failed: $(tail -n 2 "$OUT/ncu/$name.err")"
    }
    prof simpletrack $SB track --device "$DEV" --lattice "$LHC" --particles 1000000 --turns 1
    prof xtrack $SB track --engine xtrack --device "$DEV" --particles 100000 --turns 2
    # the training step: 2 timed steps after 1 warm-up, kernels of the timed steps only
    prof resnet18-fp32 --launch-skip 400 --launch-count 400 $PY -m sharebench.workloads.train --steps 2 --warmup-steps 1 --batch "$TRAIN_WORK"
    prof resnet18-amp --launch-skip 400 --launch-count 400 $PY -m sharebench.workloads.train --steps 2 --warmup-steps 1 --batch "$TRAIN_WORK" --amp
    $PY benchmarks/ncu_summary.py "$OUT/ncu" > "$OUT/ncu/profile.md" || true
fi

# the comparison: every workload's folder combined into one (rebuilt on every call)
rm -rf "$RES"
DIRS=(); for w in simpletrack resnet18-fp32 resnet18-amp xtrack; do [ -f "$OUT/$w/results.csv" ] && DIRS+=("$OUT/$w"); done
if [ ${#DIRS[@]} -gt 0 ]; then
    echo "$PY benchmarks/combine_workloads.py $RES ${DIRS[*]}" >> "$OUT/commands.txt"
    $PY benchmarks/combine_workloads.py "$RES" "${DIRS[@]}" | tee -a "$OUT/log.txt"
fi
$PY benchmarks/workloads_readme.py "$OUT" > "$OUT/README.md" || true
# the device tool brings back a bounded number of files: the folders travel as one archive
tar czf "$OUT/folders.tgz" -C "$OUT" --exclude folders.tgz $(cd "$OUT" && ls -d */ 2>/dev/null) 2>/dev/null || true
echo done
