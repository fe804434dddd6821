# Issue 33 on one lent H200, in ONE device call of under 9 minutes: users per GPU at the 2x p95 target by
# search (sharebench run --capacity), one results folder per measurement under OUTDIR.
#   device run (carry [".whl", ".devcarry"]): bash benchmarks/capacity_h200.sh "$OUT"
#   here, on the CPU (arguments checked, nothing measured): CARRY=none DEVICE=cpu FAMILIES=timeslice ST_MODES=exclusive,timeslice:3 DRY=--dry-run bash benchmarks/capacity_h200.sh /tmp/x
# Each step has its own --budget (the search stops with "between", never "≥", when it runs out) and a
# `timeout` above it (190 + 105 + 105 + 85 s, 10 s more each to stop), so the whole script ends within
# 9 minutes with its set-up (the wheel install, a few seconds).
# Steps of the plan's GPU list (notes/33-plan.md): 1 ResNet-18 inference users capacity (timeslice, mps);
# 2-3 ResNet-18 and Simpletrack serving at load 0.3 of the capacity one replica serves alone (measured
# first in the same run, `serve:load=0.3`), users and requests/s per GPU by the same search; 4 Simpletrack
# users at the bisection points (mps:3, mig-emulated:2x3g.71gb). ONLY=rn|rn-serve|st-serve|st runs one.
set -u
OUTDIR=${1:?usage: capacity_h200.sh OUTDIR}
DEVICE=${DEVICE:-cuda:0}
DRY=${DRY:-}
FAMILIES=${FAMILIES:-timeslice,mps}  # the CPU check: FAMILIES=timeslice ST_MODES=exclusive,timeslice:3
ST_MODES=${ST_MODES:-exclusive,mps:3,mig-emulated:2x3g.71gb}
SIZE=${SIZE:-}  # the CPU check: SIZE="--bursts 6 --users 2..4 --budget 60s" (later options win)
# ST_SIZE: the same for step 4 (the CPU check: ST_SIZE="--particles 2000 --bursts 5")
if [ "${CARRY:-.whl}" != none ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD/src:$PWD
else
    export PYTHONPATH=$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 XSUITE_ALLOW_KERNEL_COMPILATION=1 SHAREBENCH_CACHE=${SHAREBENCH_CACHE:-/tmp/sbcache}
PY=${PYTHON:-python3}
mkdir -p "$OUTDIR"
COMMON=(--device "$DEVICE" --slo 2 --no-progress)
RN=(--engine exec --exec "$PY -m sharebench.workloads.infer" --exec-name resnet18-infer-b8 --work 8)
ST=(--lattice .devcarry/lhc_simpletrack_7tev.json.gz --particles 1e6 --turns 1)

step() {  # step NAME SECONDS ARGS...: one sharebench run, its output kept beside its folder
    local name=$1 limit=$2
    shift 2
    echo "== $name ($(date -u +%H:%M:%S), limit ${limit}s)"
    timeout --signal=INT --kill-after=10 "$limit" "$PY" -m sharebench run "${COMMON[@]}" "$@" $DRY \
        --out "$OUTDIR/$name" >"$OUTDIR/$name.log" 2>&1
    echo "   exit $? ; $(grep -h 'capacity:' "$OUTDIR/$name/notes.txt" 2>/dev/null | tail -3)"
    tail -n 25 "$OUTDIR/$name.log"
}

# 1. ResNet-18 inference users: doubling from 8 (8 per GPU stayed within 1.27x p95 in every mode)
[ -z "${ONLY:-}" ] || [ "$ONLY" = rn ] && step rn-capacity 190 "${RN[@]}" --pattern interactive:burst=5,think=0.1 --bursts 30 --capacity \
    --modes "$FAMILIES" --users 8..48 --repeats 2 --max-repeats 3 --warmup-repeats 0 --budget 170s $SIZE
# 2. ResNet-18 serving at 0.3 of one replica's requests/s alone (about 120 req/s each: 400 batches/s alone)
[ -z "${ONLY:-}" ] || [ "$ONLY" = rn-serve ] && step rn-serve-0.3 105 "${RN[@]}" --pattern serve:load=0.3,size=1 --bursts 120 \
    --capacity --modes "$FAMILIES" --users 2..32 --repeats 1 --max-repeats 2 --warmup-repeats 0 --budget 90s $SIZE
# 3. Simpletrack serving at 0.3 of its capacity alone (about 2 req/s each: 6.85 req/s of 0.146 s alone)
[ -z "${ONLY:-}" ] || [ "$ONLY" = st-serve ] && step st-serve-0.3 105 "${ST[@]}" --pattern serve:load=0.3,size=1 --bursts 30 \
    --capacity --modes "$FAMILIES" --users 2..8 --repeats 1 --max-repeats 2 --warmup-repeats 0 --budget 90s ${ST_SIZE:-} $SIZE
# 4. Simpletrack users at the bisection points (mps 2 within 1.89x, 4 above 3.56x; 3x2g above 4.10x)
[ -z "${ONLY:-}" ] || [ "$ONLY" = st ] && step st-users-3 85 "${ST[@]}" --pattern interactive:burst=1,think=0.2 --bursts 20 \
    --modes "$ST_MODES" --repeats 2 ${ST_SIZE:-}
echo "== done $(date -u +%H:%M:%S)"
