# Sourced by a device command before `sharebench campaign` (benchmarks/plans/*.toml); one device call is one
# command of under 10 minutes (the plan's `--dry-run` prints its total; give --budget S to fit a call):
#   device run: source benchmarks/device_setup.sh && $PY -m sharebench campaign benchmarks/plans/PLAN.toml --out "$OUT/DIR" [--steps TAG] [--budget S]
# (carry: .devcarry). Installs the carried wheels ($CARRY, default .devcarry: whl/ holds cp312 wheels of what
# the machine's image lacks: xtrack, xobjects, xpart, xdeps, xfields, pyopencl and their needs), byte-compiled
# as a site's pip install leaves them (and src/: imports start as they would where sharebench is installed;
# COMPILE=0 skips it), sets PYTHONPATH and PY (the Python to run sharebench with). CARRY=none on a machine that
# has them all (a CPU dry run: `CARRY=none; source benchmarks/device_setup.sh; $PY -m sharebench campaign PLAN
# --device cpu --lattice none ...`). The plans name the LHC line as .devcarry/lhc_simpletrack_7tev.json.gz
# (--lattice overrides).
C=${CARRY:-.devcarry}
NOCOMPILE=$([ "${COMPILE:-1}" = 0 ] && echo --no-compile)
if [ "$C" != none ]; then
    python3 -m pip install -q --no-index --no-deps $NOCOMPILE --no-cache-dir --upgrade --target /tmp/site "$C"/whl/*.whl || return 1
    export PYTHONPATH=/tmp/site:$PWD/src:$PWD
else
    export PYTHONPATH=$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 XSUITE_ALLOW_KERNEL_COMPILATION=1 SHAREBENCH_CACHE=${SHAREBENCH_CACHE:-/tmp/sbcache}
PY=${PYTHON:-python3}
if [ "${COMPILE:-1}" != 0 ]; then "$PY" -m compileall -q src > /dev/null 2>&1 || true; fi
