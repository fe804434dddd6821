#!/usr/bin/env bash
# The kernel's GPU figures (results/kernel/README.md), run on a lent GPU (figures: H200):
#   bash benchmarks/device_kernel.sh OUT_DIR
# Expects PYTHONPATH with sharebench + xsuite wheels, OCL_ICD_VENDORS naming
# NVIDIA's OpenCL, and the real LHC line at $LHC (default .devcarry/...).
# Sizes can be shrunk for a dry run on a CPU machine: N1, N2, TURNS, DEVS.
set -u
OUT=${1:?out dir}
LHC=${LHC:-.devcarry/lhc_simpletrack_7tev.json.gz}
N1=${N1:-1000000}
N2=${N2:-4000000}
TURNS=${TURNS:-10}
SB="python3 -m sharebench"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,uuid,memory.total,driver_version,clocks.max.sm --format=csv > "$OUT/nvidia-smi.csv" 2>&1 || true
$SB devices | tee "$OUT/devices.txt"
OCL=${OCL:-$($SB devices --json | python3 -c "import json,sys; d=json.load(sys.stdin)['devices']; print(next((x['spec'] for x in d if x['backend']=='opencl' and x['kind']=='gpu'), ''))")}
CUDA=${CUDA:-cuda:0}
DEVS=${DEVS:-$CUDA${OCL:+,$OCL}}
echo "devices: $DEVS"
# 1. simpletrack on the real LHC line, CUDA and OpenCL, two sizes
timeout 240 $SB bench --engines simpletrack --devices "$DEVS" --lattice "$LHC" --particles "$N1,$N2" --turns "$TURNS" \
    --repeats 3 --out "$OUT/simpletrack_lhc" 2>&1 | tail -n 25
# 2. the generated ring vs the real line: same engine, same device
timeout 120 $SB bench --engines simpletrack --devices "${DEVS%%,*}" --particles "$N1" --turns "$TURNS" --repeats 3 \
    --out "$OUT/simpletrack_ring" 2>&1 | tail -n 8
# 3. xtrack's own tracker on CUDA (OpenCL is refused: its build does not finish);
#    about 115 s of set-up per repeat on the H200 machine (no Xsuite prebuilt kernels there)
timeout 330 $SB bench --engines xtrack --devices "${DEVS%%,*}" --lattice "$LHC" --particles "$N1" --turns "$TURNS" --repeats 2 \
    --out "$OUT/xtrack_lhc" 2>&1 | tail -n 8
# 4. block size
for bs in 64 256; do
    timeout 60 $SB bench --engines simpletrack --devices "$DEVS" --lattice "$LHC" --particles "$N1" --turns "$TURNS" \
        --repeats 1 --block-size $bs --out "$OUT/blocksize_$bs" 2>&1 | tail -n 5
done
echo done
