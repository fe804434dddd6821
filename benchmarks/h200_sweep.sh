#!/usr/bin/env bash
# The H200 sharing campaign (docs/results/h200/), run on the lent machine through the device tool:
#   bash benchmarks/h200_sweep.sh cuda   RESULTS_DIR [STOP_AFTER_S]   # exclusive, timeslice:2/4/8, mps:2/4/8
#   bash benchmarks/h200_sweep.sh opencl RESULTS_DIR [STOP_AFTER_S]   # exclusive, timeslice:2, mps:2
# A folder that already holds results is continued (--resume), so the campaign can be
# spread over several calls or sessions. Expects PYTHONPATH with sharebench + xsuite
# wheels, OCL_ICD_VENDORS naming NVIDIA's OpenCL, and the real LHC line at $LHC.
set -eu
WHAT=${1:?cuda or opencl}
OUTDIR=${2:?results dir}
STOP=${3:-}
LHC=${LHC:-.devcarry/lhc_simpletrack_7tev.json.gz}
PARTICLES=${PARTICLES:-5e6,1e7,1.5e7}
TURNS=${TURNS:-1}
case "$WHAT" in
  cuda)   DEV=cuda:0;     MODES=${MODES:-exclusive,timeslice:2,timeslice:4,timeslice:8,mps:2,mps:4,mps:8} ;;
  opencl) DEV=${OCL_DEV:-opencl:0.0}; MODES=${MODES:-exclusive,timeslice:2,mps:2} ;;
  *) echo "first argument: cuda or opencl" >&2; exit 2 ;;
esac
RESUME=""
[ -f "$OUTDIR/results.csv" ] && RESUME=--resume
# bring the GPU out of idle clocks before the first measured cell
python3 -m sharebench track --device "$DEV" --lattice "$LHC" --particles 2000000 --turns 3 >/dev/null 2>&1 || true
python3 -m sharebench run --device "$DEV" --lattice "$LHC" --modes "$MODES" --particles "$PARTICLES" \
    --turns "$TURNS" --repeats 3 --warmup-repeats "${WARMUP:-0}" --out "$OUTDIR" $RESUME \
    ${STOP:+--stop-after $STOP} --no-progress
