#!/usr/bin/env bash
# Issue 15's headline reproducibility and cheaper-campaign check, ONE call of the device tool (< 280 s):
#   device run: bash benchmarks/h200_headline.sh RESULTS_DIR     (carry: .devcarry)
# (a) the per-cell overhead after the shared particle file: a short sweep, benchmarks/cell_overhead.py;
# (b) the headline on this machine: exclusive, timeslice:2, mps:2 at 10 M particles, 1 turn, 3 repeats;
#     then, while time is left (BUDGET_S, default 230 s from the start), 10 turns at 5 M (--stop-after).
# Prints the GPU UUID (the provenance records it too). Never changes the card's settings.
# Tested on a CPU (no wheels, no GPU, no MPS): CARRY=none DEVICE=cpu MODES=exclusive,timeslice:2 P10=2e4 P5=1e4 WARM_P=1000.
set -u
OUTDIR=${1:?results dir}
C=${CARRY:-.devcarry}
DEVICE=${DEVICE:-cuda:0}
BUDGET_S=${BUDGET_S:-230}
P10=${P10:-1e7}
P5=${P5:-5e6}
WARM_P=${WARM_P:-2000000}
MODES=${MODES:-exclusive,timeslice:2,mps:2}
# shared with the other device scripts: wheels, PYTHONPATH, PY, LAT, the GPU's identity in gpu.csv, left
source "$(dirname "$0")/device_setup.sh"
sweep() {  # OUT ARGS...: one sharebench run, its command recorded
    local out=$1; shift
    echo "command: sharebench run --device $DEVICE ${LAT[*]} $* --out $out --no-progress" | tee -a "$OUTDIR/commands.txt"
    $PY -m sharebench run --device "$DEVICE" "${LAT[@]}" "$@" --out "$out" --no-progress
}
# warm the clocks (and the kernel, optics and particle caches) before the first measured cell
$PY -m sharebench track --device "$DEVICE" "${LAT[@]}" --particles "$WARM_P" --turns 3 >/dev/null 2>&1 || true
# (b) the headline, 1 turn at 10 M, 3 repeats; its cells also give (a) the overhead between cells
sweep "$OUTDIR/headline-10M-1turn" --modes "$MODES" --particles "$P10" --turns 1 \
    --repeats 3 --warmup-repeats 0 --stop-after $(( $(left) - 20 ))
echo "== cell overhead, 10 M x 1 turn (after the shared particle file)"
$PY benchmarks/cell_overhead.py "$OUTDIR/headline-10M-1turn" | tee "$OUTDIR/cell_overhead.txt"
if [ "$(left)" -gt 60 ]; then
    sweep "$OUTDIR/headline-5M-10turn" --modes "$MODES" --particles "$P5" --turns 10 \
        --repeats 3 --warmup-repeats 0 --stop-after $(( $(left) - 30 ))
fi
for d in "$OUTDIR"/headline-*; do
    [ -f "$d/results.csv" ] && $PY -m sharebench report "$d" >/dev/null 2>&1
    $PY -c "import json,sys; d=json.load(open(sys.argv[1])).get('device') or {}; print(sys.argv[1], 'GPU UUID:', d.get('uuid'), d.get('name'))" "$d/provenance.json"
done
echo "done in $(( $(date +%s) - T0 )) s"
