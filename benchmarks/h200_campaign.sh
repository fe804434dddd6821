#!/usr/bin/env bash
# Issue 15's H200 campaign (docs/results/h200/partitions-*), one call of the device tool:
#   device run: bash benchmarks/h200_campaign.sh RESULTS_DIR [STOP_AFTER_S]     (carry: .devcarry)
# .devcarry/whl holds cp312 wheels of what the image lacks (xtrack, xobjects, xpart, xdeps, xfields,
# xcoll, pyopencl and their needs), .devcarry/lhc_simpletrack_7tev.json.gz the real LHC line.
# 1. the SM count an MPS thread percentage gives (benchmarks/mps_sm_rounding.py, %smid of every block);
# 2. SM-share partitions and emulated MIG: exclusive, mps:1@PCT, mig-emulated:PROFILE for every H200
#    profile, and the full layouts run concurrently, at $PARTICLES, 1 turn, 2 repeats. A RESULTS_DIR that
#    already holds results is continued (--resume); STOP_AFTER_S starts no new cell after that many seconds.
# Never changes the card's settings: MPS runs as a private daemon of this user, MIG stays as it is.
set -u
OUTDIR=${1:?results dir}
STOP=${2:-}
C=${CARRY:-.devcarry}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$C"/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 XSUITE_ALLOW_KERNEL_COMPILATION=1 SHAREBENCH_CACHE=/tmp/sbcache
LHC=$C/lhc_simpletrack_7tev.json.gz
nvidia-smi --query-gpu=name,uuid,driver_version,mig.mode.current,clocks.max.sm --format=csv
python3 benchmarks/mps_sm_rounding.py --device cuda:0 | tee "$OUTDIR.sm_rounding.csv"
PARTICLES=${PARTICLES:-5e6,1e7}
MODES=${MODES:-exclusive,mps:1@50,mps:1@25,mps:1@12,mig-emulated:7g.141gb,mig-emulated:4g.71gb,mig-emulated:3g.71gb,mig-emulated:2g.35gb,mig-emulated:1g.35gb,mig-emulated:1g.18gb,mig-emulated:4g.71gb+3g.71gb,mig-emulated:3x2g.35gb,mig-emulated:7x1g.18gb}
RESUME=""
[ -f "$OUTDIR/results.csv" ] && RESUME=--resume
# bring the GPU out of idle clocks before the first measured cell
python3 -m sharebench track --device cuda:0 --lattice "$LHC" --particles 2000000 --turns 3 >/dev/null 2>&1 || true
echo "command: sharebench run --device cuda:0 --lattice $LHC --modes $MODES --particles $PARTICLES --turns 1 --repeats 2 --warmup-repeats 0 --out $OUTDIR $RESUME ${STOP:+--stop-after $STOP}"
python3 -m sharebench run --device cuda:0 --lattice "$LHC" --modes "$MODES" --particles "$PARTICLES" \
    --turns 1 --repeats 2 --warmup-repeats 0 --out "$OUTDIR" $RESUME ${STOP:+--stop-after $STOP} --no-progress
