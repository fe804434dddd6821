"""The built-in ML workload: a ResNet-18 training loop in plain PyTorch, following the replica protocol.

    python -m sharebench.workloads.train [--batch N] [--steps N] [--warmup-steps N] [--image-size N] [--amp]

Model: ResNet-18 (torchvision's architecture, defined in sharebench.workloads.resnet; random weights, 1000
classes), SGD (lr 0.1, momentum 0.9), cross-entropy,
on one fixed batch of seeded synthetic images (``--image-size`` squared, 3 channels) and labels held
on the device, so the data loader costs nothing and every step is the same work. Set-up (model,
data, ``--warmup-steps`` steps to let cuDNN pick its kernels) happens before the ready file; the
timed window is ``--steps`` steps, synchronised. Work = samples (steps x batch); the batch is
``SHAREBENCH_WORK`` under a sweep (``--work``), else ``--batch``. It serves cells
(``sharebench.workloads.protocol``): under a warm replica it sets up once and takes cell after cell,
rebuilding the batch when the size changes and running the warm-up steps before each cell's ready file. FP32 by default, ``--amp`` for
mixed precision (bfloat16 autocast). Needs the ``ml`` extra (``pip install 'sharebench[ml]'``).

As the sweep's workload: ``sharebench run --engine exec --exec 'python -m sharebench.workloads.train'
--work 128``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from sharebench.errors import UserError
from sharebench.parse import whole_number
from sharebench.workloads.protocol import (
    RESULT_FILE,
    cells,
    offered_serving,
    ready,
    wait_for_start,
    work_size,
    write_result,
)
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


@dataclass
class Trainer:
    """What a serving training program keeps from one cell to the next: torch, the device, the model,
    its optimizer and the batch of the last cell's size (rebuilt when the size changes)."""

    torch: Any
    device: Any
    model: Any
    opt: Any
    image_size: int
    amp: bool
    seed: int
    images: Any = None
    labels: Any = None
    batch: int = 0

    def step(self) -> Any:
        torch = self.torch
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=self.amp):
            loss = torch.nn.functional.cross_entropy(self.model(self.images), self.labels)
        loss.backward()
        self.opt.step()
        return loss

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def use_batch(self, batch: int, warmup_steps: int) -> None:
        """Images and labels of ``batch`` (seeded; kept when the size is the last cell's), then the warm-up."""
        if batch != self.batch:
            torch = self.torch
            gen = torch.Generator().manual_seed(self.seed)
            size = self.image_size
            self.images = torch.randn(batch, 3, size, size, generator=gen).to(self.device)
            self.labels = torch.randint(0, 1000, (batch,), generator=gen).to(self.device)
            self.batch = batch
        for _ in range(warmup_steps):
            self.step()
        self.sync()


def setup(image_size: int, amp: bool, seed: int, device_spec: str, threads: int | None = None) -> Trainer:
    """Import torch, build ResNet-18 and SGD on the device (once per process: a serving program keeps them)."""
    torch = import_torch()
    torch.manual_seed(seed)
    if threads:
        torch.set_num_threads(threads)
    device = pick_device(torch, device_spec)
    model = resnet18(torch, num_classes=1000).to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    return Trainer(torch, device, model, opt, image_size, amp, seed)


def train_cell(t: Trainer, batch: int, steps: int, warmup_steps: int) -> dict[str, Any]:
    """One cell on a set-up model: the batch, warm-up, ready, the barrier, the timed steps; its result."""
    t.use_batch(batch, warmup_steps)
    ready()
    start = wait_for_start()
    loss = None
    for _ in range(steps):
        loss = t.step()
    t.sync()
    end = time.time()
    return {
        "start": start,
        "end": end,
        "work": batch * steps,
        "unit": "samples",
        "model": "resnet18",
        "batch": batch,
        "steps": steps,
        "image_size": t.image_size,
        "precision": "bf16-amp" if t.amp else "fp32",
        "final_loss": float(loss.item()) if loss is not None else None,
        "torch": t.torch.__version__,
        **device_facts(t.torch, t.device),
    }


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
    return train_cell(setup(image_size, amp, seed, device_spec, threads), batch, steps, warmup_steps)


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
        batch_default = whole_number("--batch", args.batch, 1)
        steps = whole_number("--steps", args.steps, 1)
        warmup = whole_number("--warmup-steps", args.warmup_steps, 0)
        first = work_size(batch_default)  # a bad size fails before the set-up
        t = setup(
            whole_number("--image-size", args.image_size, 32),
            args.amp,
            whole_number("--seed", args.seed, 0),
            args.device or os.environ.get("SHAREBENCH_DEVICE", "auto"),
            threads=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        )
        if not os.environ.get(RESULT_FILE) and not offered_serving():  # outside a cell: one, on stdout
            write_result(**train_cell(t, first, steps, warmup))
            return 0
        if not os.environ.get(RESULT_FILE):  # a prime: the first cell's batch and warm-up before the ready file
            t.use_batch(first, warmup)
        for _ in cells():  # one cell, or cell after cell when the harness offers serving cells
            write_result(**train_cell(t, work_size(batch_default), steps, warmup), serving=offered_serving())
    except UserError as exc:
        print(f"train: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
