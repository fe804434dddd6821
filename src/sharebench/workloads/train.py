"""The built-in ML workload: a ResNet-18 training loop in plain PyTorch, following the replica protocol.

    python -m sharebench.workloads.train [--batch N] [--steps N] [--warmup-steps N] [--image-size N] [--amp]

Model: ResNet-18 (torchvision's architecture, defined in sharebench.workloads.resnet; random weights, 1000
classes), SGD (lr 0.1, momentum 0.9), cross-entropy,
on one fixed batch of seeded synthetic images (``--image-size`` squared, 3 channels) and labels held
on the device, so the data loader costs nothing and every step is the same work. Set-up (model,
data, ``--warmup-steps`` steps to let cuDNN pick its kernels) happens before the ready file; the
timed window is ``--steps`` steps, synchronised. Work = samples (steps x batch); the batch is
``SHAREBENCH_WORK`` under a sweep (``--work``), else ``--batch``. FP32 by default, ``--amp`` for
mixed precision (bfloat16 autocast). Needs the ``ml`` extra (``pip install 'sharebench[ml]'``).

As the sweep's workload: ``sharebench run --engine exec --exec 'python -m sharebench.workloads.train'
--work 128``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from sharebench.errors import UserError
from sharebench.parse import whole_number
from sharebench.workloads.protocol import ready, wait_for_start, work_size, write_result
from sharebench.workloads.resnet import resnet18


def import_torch() -> Any:
    """torch; UserError naming the extra when absent."""
    try:
        import torch  # noqa: PLC0415 - optional: the ml extra
    except ImportError as exc:
        raise UserError(
            f"the training workload needs PyTorch ({exc}); install it with "
            "`pip install 'sharebench[ml]'` (or `make install-ml`)"
        ) from None
    return torch


def pick_device(torch: Any, spec: str) -> Any:
    """The torch device for a sharebench device spec: cuda[:N] and auto use CUDA when torch sees it."""
    s = (spec or "auto").strip().lower()
    if s.startswith("cuda") or (s == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise UserError(f"device {spec!r}: PyTorch sees no CUDA GPU (torch {torch.__version__}); use --device cpu")
        return torch.device(s if s.startswith("cuda") else "cuda")
    return torch.device("cpu")


def device_facts(torch: Any, device: Any) -> dict[str, str]:
    """The device's name and UUID as the result file reports them."""
    if device.type != "cuda":
        return {"context": "torch-cpu"}
    props = torch.cuda.get_device_properties(device)
    uuid = str(getattr(props, "uuid", "") or "")
    if uuid and not uuid.startswith(("GPU-", "MIG-")):
        uuid = f"GPU-{uuid}"
    return {"context": "torch-cuda", "device_name": str(props.name), "device_uuid": uuid}


def train(
    batch: int,
    steps: int,
    warmup_steps: int,
    image_size: int,
    amp: bool,
    seed: int,
    device_spec: str,
    threads: int | None = None,
) -> dict[str, Any]:
    """Set up, wait at the barrier, run the timed steps; the result document (protocol keys and extras)."""
    torch = import_torch()
    torch.manual_seed(seed)
    if threads:
        torch.set_num_threads(threads)
    device = pick_device(torch, device_spec)
    model = resnet18(torch, num_classes=1000).to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(seed)
    images = torch.randn(batch, 3, image_size, image_size, generator=gen).to(device)
    labels = torch.randint(0, 1000, (batch,), generator=gen).to(device)
    amp_dtype = torch.bfloat16
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True

    def step() -> Any:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=amp_dtype, enabled=amp):
            loss = loss_fn(model(images), labels)
        loss.backward()
        opt.step()
        return loss

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(warmup_steps):
        step()
    sync()
    ready()
    start = wait_for_start()
    loss = None
    for _ in range(steps):
        loss = step()
    sync()
    end = time.time()
    return {
        "start": start,
        "end": end,
        "work": batch * steps,
        "unit": "samples",
        "model": "resnet18",
        "batch": batch,
        "steps": steps,
        "image_size": image_size,
        "precision": "bf16-amp" if amp else "fp32",
        "final_loss": float(loss.item()) if loss is not None else None,
        "torch": torch.__version__,
        **device_facts(torch, device),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sharebench.workloads.train", description=__doc__.splitlines()[0])
    ap.add_argument("--batch", default="128", help="images per step when SHAREBENCH_WORK is not set (default 128)")
    ap.add_argument("--steps", default="150", help="timed SGD steps (default 150)")
    ap.add_argument("--warmup-steps", default="15", help="untimed steps before the ready file (default 15)")
    ap.add_argument("--image-size", default="224", help="image side in pixels (default 224)")
    ap.add_argument("--amp", action="store_true", help="mixed precision (bfloat16 autocast); default FP32")
    ap.add_argument("--seed", default="1", help="seed of the weights and the synthetic data (default 1)")
    ap.add_argument("--device", default=None, help="auto, cpu or cuda[:N] (default: SHAREBENCH_DEVICE, else auto)")
    args = ap.parse_args(argv)
    try:
        batch = work_size(whole_number("--batch", args.batch, 1))
        doc = train(
            batch,
            whole_number("--steps", args.steps, 1),
            whole_number("--warmup-steps", args.warmup_steps, 0),
            whole_number("--image-size", args.image_size, 32),
            args.amp,
            whole_number("--seed", args.seed, 0),
            args.device or os.environ.get("SHAREBENCH_DEVICE", "auto"),
            threads=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        )
    except UserError as exc:
        print(f"train: error: {exc}", file=sys.stderr)
        return 2
    write_result(**doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
