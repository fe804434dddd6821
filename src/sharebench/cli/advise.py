"""``sharebench advise``: a site's GPU usage and the measured costs in, a pool layout out (never applied)."""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from pathlib import Path

from sharebench.advise import (
    Window,
    advise,
    class_patterns,
    parse_class_overrides,
    parse_time,
    read_costs,
    read_prometheus,
    read_usage_csv,
    write_advice,
)
from sharebench.analysis.latency import DEFAULT_SLO, check_slo
from sharebench.errors import UserError


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Replay a site's GPU usage (a CSV or dcgm-exporter's per-pod series in Prometheus) on candidate "
        "layouts (whole GPUs, timeslice:N, mps:N, MIG) with the slowdowns measured in results folders of the "
        "pool's GPU model, and recommend the layout with the fewest GPUs that keeps every class's p95 "
        "slowdown within --slo. Writes advice.md, advice.html, advice.json; applies nothing."
    )
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--usage", metavar="FILE", help="CSV: time,gpu,pod,class,busy,memory_bytes")
    src.add_argument("--prometheus", metavar="URL", help="Prometheus with dcgm-exporter's per-pod series")
    parser.add_argument("--since", help="window start (epoch s or ISO 8601; Prometheus; default: --until - 1 day)")
    parser.add_argument("--until", help="window end (epoch s or ISO 8601; Prometheus; default: now)")
    parser.add_argument("--step", type=float, default=60.0, metavar="S", help="seconds per step (default 60)")
    parser.add_argument(
        "--class-label", default="namespace", help="the series label naming a class (default namespace)"
    )
    parser.add_argument(
        "--class",
        dest="classes",
        action="append",
        metavar="NAME=PATTERN",
        help="set a class's pattern (batch, interactive, serve) instead of inferring it; repeatable",
    )
    parser.add_argument(
        "--results", nargs="+", required=True, metavar="DIR", help="results folders of the pool's GPU model"
    )
    parser.add_argument("--gpu-model", help="the pool's GPU model (default: the results folders')")
    parser.add_argument("--slo", default=str(DEFAULT_SLO), help="p95 slowdown target per class (default 2)")
    parser.add_argument("--out", help="output folder (default: sharebench-advice/<UTC timestamp>)")
    parser.set_defaults(func=cmd_advise)


def cmd_advise(args: argparse.Namespace) -> int:
    slo = check_slo(args.slo)
    overrides = parse_class_overrides(args.classes)
    costs = read_costs(args.results, args.gpu_model)
    if args.usage:
        usage = read_usage_csv(args.usage)
    else:
        until = parse_time(args.until, "--until") if args.until else time.time()
        since = parse_time(args.since, "--since") if args.since else until - 86_400
        if not args.step > 0:
            raise UserError(f"bad --step {args.step!r}; allowed: seconds > 0")
        usage = read_prometheus(args.prometheus, Window(since, until, float(args.step)), args.class_label)
    patterns = class_patterns(usage, overrides)
    result = advise(usage, costs, patterns, slo)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else Path("sharebench-advice") / stamp
    paths = write_advice(result, out)
    if result.recommended:
        r = result.recommended
        print(f"recommended: {r.gpus} GPUs (today {result.today_total}); p95 target {slo:g}x")
        for c, o in r.choice.items():
            print(f"  {c} ({patterns[c]}): {o.option.mode} on {o.gpus} GPU(s), p95 slowdown {o.p95:.2f}x")
    else:
        print(f"no layout keeps every class within {slo:g}x; see {paths['md']}")
    print(f"wrote {paths['md']}, {paths['html']}, {paths['json']}")
    return 0
