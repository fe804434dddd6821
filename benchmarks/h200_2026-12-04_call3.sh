#!/usr/bin/env bash
# third H200 call of 2026-12-04: issue 35's rn-users and adaptive/fixed, issue 33's serving at load 0.3
set -u
ln -sfn ../.whl .whl 2>/dev/null
T0=$(date +%s)
nvidia-smi -L
BUDGET_S=105 RN_BURSTS=40 ST_PARTICLES=5e6 AD_BUDGET=45s STEPS="rn-users" \
    bash benchmarks/time_to_answer_h200.sh /tmp/r3/tta
export PYTHONPATH=/tmp/site:$PWD/src:$PWD
ONLY=st-serve CARRY=none bash benchmarks/capacity_h200.sh /tmp/r3/cap
BUDGET_S=110 ST_PARTICLES=5e6 AD_BUDGET=45s STEPS="adaptive fixed" INSTALL=0 \
    bash benchmarks/time_to_answer_h200.sh /tmp/r3/tta
ONLY=rn-serve CARRY=none bash benchmarks/capacity_h200.sh /tmp/r3/cap
echo "run3 done in $(( $(date +%s) - T0 )) s"
