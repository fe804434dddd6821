"""The built-in inference workload: ResNet-18 forward passes in plain PyTorch, following the replica protocol
and a replica pattern, with one record per request.

    python -m sharebench.workloads.infer [--batch N] [--requests N | --duration S] [--pattern P]
                                         [--warmup N] [--image-size N] [--amp] [--cudnn-benchmark] [--seed N]
                                         [--device D]

Model: ResNet-18 (``sharebench.workloads.resnet``; random weights, 1000 classes) in eval mode under
``torch.inference_mode``, on one fixed batch of seeded synthetic images held on the device. A unit of
work is one batch through the model, synchronised (``--batch`` images: 1, 8 or 32 in the study; the
batch is ``SHAREBENCH_WORK`` under a sweep, ``--work``). The pattern (``sharebench.patterns``:
``batch``, ``interactive:burst=N,think=S``, ``serve:rate=R,size=N``) comes from ``--pattern``, else
``SHAREBENCH_PATTERN``, else ``batch``; its think times or arrivals are seeded by
``SHAREBENCH_PATTERN_SEED`` (else ``--seed``) together with ``SHAREBENCH_REPLICA``, so the replicas of a
cell are out of step. Set-up (model, data, ``--warmup`` batches) happens before the ready file; the timed
window is ``--requests`` bursts or requests (or ``--duration`` seconds) of the pattern; without either,
under a sweep's patterned cell, ``SHAREBENCH_PATTERN_COUNT`` (the victim) or until
``SHAREBENCH_STOP_FILE`` exists (a neighbour); else 100. The result: work = samples (batches x batch),
unit ``samples``; each burst's arrival, start, end and batches go to the file named by
``SHAREBENCH_BURSTS`` (``workloads.bursts``). It serves cells (``sharebench.workloads.protocol``): under a
warm replica it sets up once (torch, the model) and takes cell after cell, rebuilding the batch only when
the size changes and running ``--warmup`` batches before each cell's ready file.
cuDNN's autotuner is off by default: with it (``--cudnn-benchmark``) each process times and picks its own
kernels, so the replicas of a cell, and the alone baseline against the shared cells, may run different
kernels (per-process medians of one alone cell differed by half on an H200 with it on); the setting is in
the result (``cudnn_benchmark``).
FP32 by default, ``--amp`` for bfloat16 autocast. Needs the ``ml`` extra.

As the sweep's workload: ``sharebench run --engine exec --exec 'python -m sharebench.workloads.infer
--pattern serve:rate=50' --work 8``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from sharebench.errors import UserError
from sharebench.parse import seconds, whole_number
from sharebench.patterns import Pattern, parse_pattern
from sharebench.workloads.bursts import (
    limit_from_env,
    pattern_from_env,
    progress_from_env,
    record_bursts,
    run_pattern,
    seed_from_env,
)
from sharebench.workloads.protocol import (
    REPLICA,
    RESULT_FILE,
    cells,
    offered_serving,
    ready,
    wait_for_start,
    work_size,
    write_result,
)
from sharebench.workloads.resnet import resnet18
from sharebench.workloads.train import device_facts, pick_device


def import_torch() -> Any:
    """torch; UserError naming the extra when absent."""
    try:
        import torch  # noqa: PLC0415 - optional: the ml extra
    except ImportError as exc:
        raise UserError(
            f"the inference workload needs PyTorch ({exc}); install it with "
            "`pip install 'sharebench[ml]'` (or `make install-ml`)"
        ) from None
    return torch


@dataclass
class Model:
    """What a serving inference program keeps from one cell to the next: torch, the device, the model
    and the batch of images of the last cell's size (rebuilt when the size changes)."""

    torch: Any
    device: Any
    model: Any
    image_size: int
    amp: bool
    seed: int
    cudnn_benchmark: bool
    images: Any = None
    batch: int = 0

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def do_work(self, batches: int) -> None:
        torch = self.torch
        with (
            torch.inference_mode(),
            torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=self.amp),
        ):
            for _ in range(batches):
                self.model(self.images)
        self.sync()

    def use_batch(self, batch: int, warmup: int) -> None:
        """Images of ``batch`` (seeded; kept when the size is the last cell's), then ``warmup`` batches."""
        if batch != self.batch:
            gen = self.torch.Generator().manual_seed(self.seed)
            self.images = self.torch.randn(batch, 3, self.image_size, self.image_size, generator=gen).to(self.device)
            self.batch = batch
        self.do_work(warmup)


class ModelOptions(NamedTuple):
    """How the model is built and run: image side, bfloat16 autocast, seed, cuDNN's autotuner."""

    image_size: int
    amp: bool
    seed: int
    cudnn_benchmark: bool = False


class CellInputs(NamedTuple):
    """One cell's inputs: batch, pattern, limit (count or duration), warm-up batches, pattern seed, stop."""

    batch: int
    pattern: Pattern
    limit: dict[str, Any]
    warmup: int
    pattern_seed: list[int]
    stop: Callable[[], bool] | None = None


def setup(options: ModelOptions, device_spec: str, threads: int | None = None) -> Model:
    """Import torch, build ResNet-18 on the device (once per process: a serving program keeps it). On a
    GPU the weights are made there (no CPU initialisation, no copy: a sweep primes tens of these at once);
    the seconds of each phase go to stderr (the program's log)."""
    image_size, amp, seed, cudnn_benchmark = options
    t0 = time.perf_counter()
    torch = import_torch()
    t_import = time.perf_counter()
    torch.manual_seed(seed)
    device = pick_device(torch, device_spec)
    if device.type == "cuda":
        torch.cuda.init()
    elif threads:
        torch.set_num_threads(threads)  # CPU inference: its CPU set; on a GPU the host threads only feed it
    t_device = time.perf_counter()
    with torch.device(device):
        model = resnet18(torch, num_classes=1000).eval()
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = cudnn_benchmark
    t_model = time.perf_counter()
    print(
        f"infer: set-up {t_model - t0:.2f} s: import torch {t_import - t0:.2f} s, device {t_device - t_import:.2f} s, "
        f"model {t_model - t_device:.2f} s",
        file=sys.stderr,
        flush=True,
    )
    return Model(torch, device, model, image_size, amp, seed, bool(cudnn_benchmark and device.type == "cuda"))


def serve_cell(m: Model, cell: CellInputs) -> dict[str, Any]:
    """One cell on a set-up model: the batch, warm-up, ready, the barrier, the pattern; its result."""
    batch, pattern, limit, warmup, pattern_seed, stop = cell
    m.use_batch(batch, warmup)
    ready()
    start = wait_for_start()
    bursts = run_pattern(pattern, m.do_work, seed=pattern_seed, stop=stop, progress=progress_from_env(), **limit)
    end = time.time()
    latency_ms = np.array([b.latency_s for b in bursts]) * 1e3
    record_bursts(bursts, pattern, pattern_seed, unit="batches", batch=batch, model="resnet18")
    return {
        "start": start,
        "end": max(end, start + 1e-9),
        "work": max(1, sum(b.units for b in bursts)) * batch,
        "unit": "samples",
        "model": "resnet18",
        "mode": "inference",
        "batch": batch,
        "image_size": m.image_size,
        "precision": "bf16-amp" if m.amp else "fp32",
        "cudnn_benchmark": m.cudnn_benchmark,
        "pattern": pattern.label,
        "pattern_seed": pattern_seed,
        "bursts": len(bursts),
        "latency_p50_ms": float(np.percentile(latency_ms, 50)) if bursts else None,
        "latency_p95_ms": float(np.percentile(latency_ms, 95)) if bursts else None,
        "torch": m.torch.__version__,
        **device_facts(m.torch, m.device),
    }


def infer(
    batch: int,
    pattern: Pattern,
    limit: dict[str, Any],
    warmup: int,
    image_size: int,
    amp: bool,
    seed: int,
    device_spec: str,
    pattern_seed: list[int],
    threads: int | None = None,
    stop: Callable[[], bool] | None = None,
    cudnn_benchmark: bool = False,
) -> dict[str, Any]:
    """Set up, wait at the barrier, run the pattern; the result document (protocol keys and extras).
    ``limit`` is ``{"count": N}`` or ``{"duration_s": S}``; ``cudnn_benchmark``: cuDNN's per-process
    autotuner (off: every replica runs the same heuristic kernels)."""
    m = setup(ModelOptions(image_size, amp, seed, cudnn_benchmark), device_spec, threads)
    return serve_cell(m, CellInputs(batch, pattern, limit, warmup, pattern_seed, stop))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m sharebench.workloads.infer", description=__doc__.splitlines()[0])
    ap.add_argument("--batch", default="8", help="images per batch when SHAREBENCH_WORK is not set (default 8)")
    stop = ap.add_mutually_exclusive_group()
    stop.add_argument("--requests", default=None, help="bursts or requests in the timed window (default 100)")
    stop.add_argument("--duration", default=None, help="seconds of the pattern instead of --requests")
    ap.add_argument(
        "--pattern", default=None, help="batch, interactive[:...], serve[:...] (default: SHAREBENCH_PATTERN)"
    )
    ap.add_argument("--warmup", default="5", help="untimed batches before the ready file (default 5)")
    ap.add_argument("--image-size", default="224", help="image side in pixels (default 224)")
    ap.add_argument("--amp", action="store_true", help="mixed precision (bfloat16 autocast); default FP32")
    ap.add_argument(
        "--cudnn-benchmark",
        action="store_true",
        help="let cuDNN time and pick kernels per process (default off: the same kernels in every replica)",
    )
    ap.add_argument("--seed", default="1", help="seed of the weights, the data and the pattern (default 1)")
    ap.add_argument("--device", default=None, help="auto, cpu or cuda[:N] (default: SHAREBENCH_DEVICE, else auto)")
    return ap.parse_args(argv)


def cell_inputs(
    args: argparse.Namespace, seed: int
) -> tuple[int, Pattern, dict[str, Any], Callable[[], bool] | None, list[int]]:
    """This cell's batch, pattern, limit, stop and pattern seed: the arguments, else the cell's variables."""
    stop = None
    if args.duration is not None:
        limit: dict[str, Any] = {"duration_s": seconds("--duration", args.duration, 0.001)}
    elif args.requests is not None:
        limit = {"count": whole_number("--requests", args.requests, 1)}
    else:  # a sweep's patterned cell: the victim's count, or a neighbour's stop file
        limit, stop = limit_from_env({"count": 100})
    pattern = parse_pattern(args.pattern) if args.pattern else pattern_from_env()
    replica = whole_number(REPLICA, os.environ.get(REPLICA, "0"), 0)
    batch = work_size(whole_number("--batch", args.batch, 1))
    return batch, pattern, limit, stop, [seed_from_env(seed), replica]


def main(argv: list[str] | None = None) -> int:
    """Set up once, then serve each cell (one outside a sweep; cell after cell when the harness offers
    serving cells, ``sharebench.workloads.protocol.cells``)."""
    args = parse_args(argv)
    try:
        seed = whole_number("--seed", args.seed, 0)
        warmup = whole_number("--warmup", args.warmup, 0)
        cell_inputs(args, seed)  # bad arguments fail before the set-up
        m = setup(
            ModelOptions(whole_number("--image-size", args.image_size, 32), args.amp, seed, args.cudnn_benchmark),
            args.device or os.environ.get("SHAREBENCH_DEVICE", "auto"),
            threads=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        )
        if not os.environ.get(RESULT_FILE) and not offered_serving():  # outside a cell: one, on stdout
            write_result(**serve_cell(m, run_args(args, seed, warmup)))
            return 0
        if not os.environ.get(RESULT_FILE):  # a prime: the first cell's batch and warm-up before the ready file
            t0 = time.perf_counter()
            m.use_batch(work_size(whole_number("--batch", args.batch, 1)), warmup)
            print(
                f"infer: first batch and {warmup} warm-up batch(es) {time.perf_counter() - t0:.2f} s", file=sys.stderr
            )
        for _ in cells():
            write_result(**serve_cell(m, run_args(args, seed, warmup)), serving=offered_serving())
    except UserError as exc:
        print(f"infer: error: {exc}", file=sys.stderr)
        return 2
    return 0


def run_args(args: argparse.Namespace, seed: int, warmup: int) -> CellInputs:
    """This cell's inputs (serve_cell's)."""
    batch, pattern, limit, stop, pattern_seed = cell_inputs(args, seed)
    return CellInputs(batch, pattern, limit, warmup, pattern_seed, stop)


if __name__ == "__main__":
    sys.exit(main())
