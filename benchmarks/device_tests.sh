#!/usr/bin/env bash
# The test suite's GPU paths on a lent NVIDIA machine (CUDA through CuPy, NVIDIA's OpenCL, PoCL, a
# private MPS daemon, NVML), through the device tool:
#   device run: bash benchmarks/device_tests.sh        (carry: .whl .devcarry)
# .whl holds cp312 wheels of what the machine's image lacks (xtrack, xobjects, xpart, xdeps, xfields,
# xsuite (for its version in provenance), pyopencl, kubernetes and their needs); .devcarry the real LHC line. The KFP,
# Kubernetes and notebook tests need no GPU and run in CI; they are left out here.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src:$PWD/tests PYTHONUNBUFFERED=1 XSUITE_ALLOW_KERNEL_COMPILATION=1
export SHAREBENCH_SHARED=$PWD/.devcarry/shared SHAREBENCH_CACHE=/tmp/sbcache
mkdir -p "$SHAREBENCH_SHARED/lattices" && cp .devcarry/lhc_simpletrack_7tev.json.gz "$SHAREBENCH_SHARED/lattices/"
# NVIDIA's OpenCL, and PoCL beside it where its wheel (pocl-binary-distribution, 58 MB: over the
# carry limit with the rest) was carried: one vendors folder naming both
mkdir -p /tmp/icd && echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd
POCL=$(find /tmp/site -name "libpocl*.so*" | head -n 1); [ -n "$POCL" ] && echo "$POCL" > /tmp/icd/pocl.icd
export OCL_ICD_VENDORS=/tmp/icd
nvidia-smi --query-gpu=name,uuid,driver_version,mig.mode.current --format=csv
python3 -m sharebench devices
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout "${BUDGET_S:-540}" python3 -m pytest -p no:cacheprovider -q -rs --timeout 300 \
    tests/kernel tests/sharing tests/telemetry tests/sweep tests/results tests/analysis tests/report \
    tests/vocabulary tests/cli "$@" 2>&1 | tee "$OUT/device_tests.log" | tail -n 60
