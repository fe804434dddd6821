# Sourced by the device scripts (h200_headline.sh, h200_warm.sh) after they set OUTDIR, C (the carry
# folder, or none), DEVICE and BUDGET_S: installs the carried wheels, sets PYTHONPATH, PY and LAT (the LHC
# line), appends the GPU's name, UUID, driver, MIG mode and clock to $OUTDIR/gpu.csv, and defines left
# (seconds of BUDGET_S still to spend).
T0=$(date +%s)
if [ "$C" != none ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$C"/whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD/src
    LATTICE=${LATTICE-$C/lhc_simpletrack_7tev.json.gz}
fi
export PYTHONUNBUFFERED=1 XSUITE_ALLOW_KERNEL_COMPILATION=1 SHAREBENCH_CACHE=${SHAREBENCH_CACHE:-/tmp/sbcache}
PY=${PYTHON:-python3}
LAT=()
[ -n "${LATTICE:-}" ] && LAT=(--lattice "$LATTICE")
mkdir -p "$OUTDIR"
if command -v nvidia-smi >/dev/null && [ "$DEVICE" != cpu ]; then
    nvidia-smi --query-gpu=name,uuid,driver_version,mig.mode.current,clocks.max.sm --format=csv | tee -a "$OUTDIR/gpu.csv"
fi
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
