#!/usr/bin/env bash
# Issue 15's cheaper campaign and run-length study on one H200, in calls of the device tool (< 600 s each):
#   device run: bash benchmarks/h200_warm.sh RESULTS_DIR STEP...     (carry: .devcarry)
# Steps (each its own results folder under RESULTS_DIR, the commands in RESULTS_DIR/commands.txt):
#   smoke     the headline modes at 1 M x 1 turn, one repeat, warm replicas: stops the script (exit 3)
#             when a cell failed, before the device time goes into the long steps
#   ab        exclusive, timeslice:2, mps:2 at 10 M x 1 turn, 3 repeats: warm replicas (the default), then
#             the same with --fresh-replicas; benchmarks/cell_overhead.py on both (cell_overhead.txt)
#   emul15    every H200 profile emulated (mig-emulated:PROFILE) alone and the full layouts, 15 M x 1 turn
#   turns10   the headline modes at 10 M x 10 turns, 2 repeats
#   turns30   the headline modes at 10 M x 30 turns, 2 repeats
# Each sweep starts no new cell once BUDGET_S (default 540 s from the start) is near (--stop-after).
# Never changes the card's settings: MPS runs as a private daemon, MIG stays as it is.
# Tested on a CPU: CARRY=none DEVICE=cpu WARM_P=1000 HEAD_MODES=exclusive,timeslice:2 P10=4000 P15=2000 bash
#   benchmarks/h200_warm.sh /tmp/hw ab turns10     (emul15 needs MPS)
set -u
OUTDIR=${1:?results dir}
shift
C=${CARRY:-.devcarry}
DEVICE=${DEVICE:-cuda:0}
BUDGET_S=${BUDGET_S:-540}
P10=${P10:-1e7}
P15=${P15:-1.5e7}
HEAD_MODES=${HEAD_MODES:-exclusive,timeslice:2,mps:2}
EMUL_MODES=${EMUL_MODES:-exclusive,mig-emulated:7g.141gb,mig-emulated:4g.71gb,mig-emulated:3g.71gb,mig-emulated:2g.35gb,mig-emulated:1g.35gb,mig-emulated:1g.18gb,mig-emulated:4g.71gb+3g.71gb,mig-emulated:3x2g.35gb,mig-emulated:7x1g.18gb}
# shared with the other device scripts: wheels, PYTHONPATH, PY, LAT, the GPU's identity in gpu.csv, left
source "$(dirname "$0")/device_setup.sh"
sweep() {  # OUT MARGIN_S ARGS...: one sharebench run, its command recorded; no new cell MARGIN_S before the budget
    local out=$1 margin=$2; shift 2
    local stop=$(( $(left) - margin ))
    if [ "$stop" -lt 5 ]; then echo "skipped $out: budget spent" | tee -a "$OUTDIR/commands.txt"; return; fi
    echo "command: sharebench run --device $DEVICE ${LAT[*]} $* --out $out --no-progress --stop-after $stop" \
        | tee -a "$OUTDIR/commands.txt"
    $PY -m sharebench run --device "$DEVICE" "${LAT[@]}" "$@" --out "$out" --no-progress --stop-after "$stop" \
        2>&1 | tail -n 25
}
# warm the clocks (and the kernel, optics and particle caches) before the first measured cell
$PY -m sharebench track --device "$DEVICE" "${LAT[@]}" --particles "${WARM_P:-2000000}" --turns 3 >/dev/null 2>&1 || true
for step in "$@"; do
    echo "== $step at $(( $(date +%s) - T0 )) s"
    case $step in
        smoke)
            sweep "$OUTDIR/smoke" 60 --modes "$HEAD_MODES" --particles "${P_SMOKE:-1e6}" --turns 1 --repeats 1 \
                --warmup-repeats 0
            if ! $PY -c "import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); sys.exit(0 if r and all(x['cell_status']=='ok' for x in r) else 1)" "$OUTDIR/smoke/results.csv"; then
                echo "smoke: a cell failed; stopping"; grep -h . "$OUTDIR"/smoke/cells/*/replica.*.log | tail -n 20; exit 3
            fi ;;
        ab)
            sweep "$OUTDIR/warm-10M-1turn" 60 --modes "$HEAD_MODES" --particles "$P10" --turns 1 --repeats 3 \
                --warmup-repeats 0
            sweep "$OUTDIR/fresh-10M-1turn" 60 --modes "$HEAD_MODES" --particles "$P10" --turns 1 --repeats 3 \
                --warmup-repeats 0 --fresh-replicas
            for d in warm fresh; do
                echo "== $d replicas: benchmarks/cell_overhead.py $d-10M-1turn" | tee -a "$OUTDIR/cell_overhead.txt"
                $PY benchmarks/cell_overhead.py "$OUTDIR/$d-10M-1turn" | tee -a "$OUTDIR/cell_overhead.txt"
            done ;;
        emul15)
            sweep "$OUTDIR/emulated-15M" 45 --modes "$EMUL_MODES" --particles "$P15" --turns 1 --repeats 2 \
                --warmup-repeats 0 ;;
        turns10)
            sweep "$OUTDIR/headline-10M-10turn" 45 --modes "$HEAD_MODES" --particles "$P10" --turns 10 --repeats 2 \
                --warmup-repeats 0 ;;
        turns30)
            sweep "$OUTDIR/headline-10M-30turn" 45 --modes "$HEAD_MODES" --particles "$P10" --turns 30 --repeats 2 \
                --warmup-repeats 0 ;;
        *) echo "unknown step $step: allowed smoke, ab, emul15, turns10, turns30"; exit 2 ;;
    esac
done
for d in "$OUTDIR"/*/; do
    [ -f "$d/results.csv" ] && $PY -m sharebench report "$d" >/dev/null 2>&1
    [ -f "$d/provenance.json" ] && $PY -c "import json,sys; d=json.load(open(sys.argv[1])).get('device') or {}; print(sys.argv[1], 'GPU UUID:', d.get('uuid'), d.get('name'))" "$d/provenance.json"
done
echo "done in $(( $(date +%s) - T0 )) s"
