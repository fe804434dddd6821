"""``sharebench advise``: the work, imported when it runs (its options: ``sharebench.cli.advise``)."""

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
from sharebench.analysis.latency import check_slo
from sharebench.errors import UserError


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
