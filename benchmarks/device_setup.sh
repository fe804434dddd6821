# Sourced by a device command before `sharebench campaign` (benchmarks/plans/*.toml):
#   device run: source benchmarks/device_setup.sh && $PY -m sharebench campaign benchmarks/plans/PLAN.toml --out DIR
# (carry: .devcarry). Installs the carried wheels ($CARRY, default .devcarry: whl/ holds cp312 wheels of what
# the machine's image lacks: xtrack, xobjects, xpart, xdeps, xfields, pyopencl and their needs), sets
# PYTHONPATH and PY (the Python to run sharebench with). CARRY=none on a machine that has them all (a CPU dry
# run: `CARRY=none; source benchmarks/device_setup.sh; $PY -m sharebench campaign PLAN --device cpu
# --lattice none ...`). The plans name the LHC line as .devcarry/lhc_simpletrack_7tev.json.gz (--lattice
# overrides).
C=${CARRY:-.devcarry}
if [ "$C" != none ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$C"/whl/*.whl || return 1
    export PYTHONPATH=/tmp/site:$PWD/src:$PWD
else
    export PYTHONPATH=$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 XSUITE_ALLOW_KERNEL_COMPILATION=1 SHAREBENCH_CACHE=${SHAREBENCH_CACHE:-/tmp/sbcache}
PY=${PYTHON:-python3}
