"""``sharebench telemetry sample|dcgm|annotate``: the work, imported when one of them runs (their options:
``sharebench.cli.telemetry``)."""

from __future__ import annotations

import argparse
import json
import os
import time

from sharebench.cli.telemetry import sample_kind
from sharebench.devices import DeviceInfo
from sharebench.results import DCGM_CSV
from sharebench.telemetry import make_sampler
from sharebench.telemetry.grafana import post_annotations
from sharebench.telemetry.prometheus import attach_to_results, cell_windows


def sample_device(text: str) -> DeviceInfo:
    """What ``--device`` names for the sampler: the CPU, a CUDA index or a GPU/MIG UUID."""
    dev = text.strip()
    kind = sample_kind(dev)
    if kind == "cpu":
        return DeviceInfo.from_dict({"kind": "cpu", "backend": "cpu", "spec": "cpu"})
    if kind == "cuda":
        return DeviceInfo.from_dict({"kind": "gpu", "backend": "cuda", "spec": dev})
    return DeviceInfo.from_dict({"kind": "gpu", "backend": "cuda", "uuid": dev})


def cmd_sample(args: argparse.Namespace) -> int:
    sampler = make_sampler(sample_device(args.device), interval_s=args.interval, out_path=args.out).start()
    time.sleep(max(0.0, args.seconds))
    print(json.dumps(sampler.stop(), indent=2))
    return 0


def cmd_dcgm(args: argparse.Namespace) -> int:
    df = attach_to_results(
        args.results, args.url, node=args.node, node_label=args.node_label, gpu_uuid=args.gpu_uuid, step_s=args.step
    )
    print(f"{len(df)} cells -> {args.results}/{DCGM_CSV}")
    return 0


def cmd_annotate(args: argparse.Namespace) -> int:
    ids = post_annotations(args.grafana, os.environ.get(args.token_env), cell_windows(args.results), run=args.run)
    print(f"{len(ids)} annotations written to {args.grafana}")
    return 0
