"""``sharebench advise``: the work, imported when it runs (its options: ``sharebench.cli.advise``)."""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from pathlib import Path

from sharebench.advise import (
    Advice,
    CheckOptions,
    Usage,
    Window,
    advise,
    check,
    class_patterns,
    parse_class_overrides,
    parse_time,
    read_costs,
    read_prometheus,
    read_usage_csv,
    write_advice,
    write_check,
)
from sharebench.analysis.latency import check_slo
from sharebench.errors import UserError


def read_usage(args: argparse.Namespace) -> Usage:
    if args.usage:
        return read_usage_csv(args.usage, gpu_model_name=args.usage_gpu_model)
    until = parse_time(args.until, "--until") if args.until else time.time()
    since = parse_time(args.since, "--since") if args.since else until - 86_400
    if not args.step > 0:
        raise UserError(f"bad --step {float(args.step)!r}; allowed: seconds > 0")
    window = Window(since, until, float(args.step))
    return read_prometheus(args.prometheus, window, args.class_label, args.usage_gpu_model)


def headline(result: Advice, slo: float) -> list[str]:
    if not result.recommended:
        return [f"no layout keeps every class within {slo:g}x"]
    r = result.recommended
    out = [
        f"recommended: {r.gpus} GPUs (today {result.today_total} at the peak of pods present; "
        f"frees {result.today_total - r.gpus}); p95 target {slo:g}x"
    ]
    for c, o in r.choice.items():
        pattern = result.patterns[c]
        if c in result.unmeasured:
            out.append(
                f"  {c} ({pattern}): not measured, kept whole on {o.gpus} GPU(s); measure it: {result.unmeasured[c]}"
            )
        else:
            out.append(f"  {c} ({pattern}): {o.option.mode} on {o.gpus} GPU(s), p95 slowdown {o.p95:.2f}x")
    return out


def cmd_advise(args: argparse.Namespace) -> int:
    slo = check_slo(args.slo)
    overrides = parse_class_overrides(args.classes)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else Path("sharebench-advice") / stamp
    if (out / "advice.json").exists() and not args.force:
        raise UserError(f"--out {out} already holds an advice (advice.json); choose another folder or --force")
    costs = read_costs(args.results, args.gpu_model, args.allow_other_model)
    usage = read_usage(args)
    patterns = class_patterns(usage, overrides)
    result = advise(usage, costs, patterns, slo, args.allow_other_model)
    print(f"read: {result.read['usage']}")
    print(f"costs: {result.read['costs']} ({costs.model.key})")
    for w in result.warnings:
        print(w)
    paths = write_advice(result, out, force=args.force)
    print("\n".join(headline(result, slo)))
    if args.check is not None:
        got = check(usage, costs, overrides, slo, CheckOptions(args.check, args.allow_other_model))
        print("\n".join(got.lines()))
        print(f"wrote {write_check(got, out)}")
    print(f"wrote {paths['md']}, {paths['html']}, {paths['json']}, {paths['csv']}")
    return 0
