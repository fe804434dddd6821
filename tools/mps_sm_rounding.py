"""How many SMs an MPS client limited by CUDA_MPS_ACTIVE_THREAD_PERCENTAGE really gets.

Starts a private MPS daemon (sharebench.sharing.mps.MpsDaemon), then, for each percentage, one
client process launches 8 blocks per SM of 1024 threads that spin for ~0.2 ms and write the SM
id (``%smid``) they ran on; the distinct SM ids are the SMs the client was given. Prints one CSV
line per percentage beside sharebench.gpus.mps_sms (the floor-to-TPC rule the analysis uses).

    python3 -m tools.mps_sm_rounding [--device cuda:0] [--pcts 5,10,12,13,25,33,50,75,100]

Needs CuPy and an NVIDIA GPU with nvidia-cuda-mps-control (the lent H200; not CI).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from sharebench.devices import resolve_device
from sharebench.gpus import gpu_model, mps_sms
from sharebench.sharing.mps import MpsDaemon

CLIENT = r"""
import json, cupy as cp
src = r'''
extern "C" __global__ void smid(unsigned int *out, long long spin) {
    unsigned int id; asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    long long t0 = clock64(); while (clock64() - t0 < spin) {}
    if (threadIdx.x == 0) out[blockIdx.x] = id;
}'''
k = cp.RawKernel(src, "smid")
n_sm = cp.cuda.Device(0).attributes["MultiProcessorCount"]
blocks = 8 * n_sm
out = cp.zeros(blocks, dtype=cp.uint32)
k((blocks,), (1024,), (out, cp.int64(400000)))
cp.cuda.runtime.deviceSynchronize()
print(json.dumps({"reported_sms": n_sm, "used_sms": int(cp.unique(out).size)}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--pcts", default="5,10,12,13,14,20,25,33,46,49,50,75,100")
    args = ap.parse_args()
    dev = resolve_device(args.device)
    model = gpu_model(dev.name)
    print("pct,used_sms,reported_sms,mps_sms_rule,full_sms")
    with MpsDaemon(dev, mode_label="mps-sm-rounding") as mps:
        for pct in [int(p) for p in args.pcts.split(",")]:
            env = dict(os.environ, **mps.client_env(pct))
            out = subprocess.run([sys.executable, "-c", CLIENT], env=env, capture_output=True, text=True, timeout=120)
            if out.returncode != 0:
                print(f"{pct},error,,{mps_sms(model, pct)},{model.sms}  # {out.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{pct},{r['used_sms']},{r['reported_sms']},{mps_sms(model, pct)},{model.sms}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
