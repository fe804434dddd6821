"""``sharebench manifests render|check|dashboard``: the work, imported when one of them runs (their options:
``sharebench.cli.manifests``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sharebench.manifests.monitoring import dashboard
from sharebench.manifests.render import RenderOptions, check, write


def cmd_render(args: argparse.Namespace) -> int:
    written = write(
        args.out,
        RenderOptions(
            gpus=tuple(args.gpu),
            mig_strategy=args.mig_strategy,
            operator_namespace=args.operator_namespace,
            run_namespace=args.run_namespace,
            node_access=args.node_access,
            offered_nodes=tuple(args.offer_node),
            **({"image_allow": tuple(args.image_allow)} if args.image_allow else {}),
        ),
    )
    for path in written:
        print(path)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    problems = check(Path(args.dir))
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        print(
            f"sharebench: manifests in {args.dir} are out of sync; run 'sharebench manifests render --out {args.dir}'",
            file=sys.stderr,
        )
        return 1
    print(f"manifests in {args.dir} match the render")
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    print(json.dumps(dashboard(), indent=2, sort_keys=True))
    return 0
