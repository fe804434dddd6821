"""``sharebench advise``: the work, imported when it runs (its options, checked first: ``sharebench.cli.advise``).

Order: the options (checked before this module loaded), ``--out``, the usage's header (a CSV that names no
GPU model is refused here unless ``--gpu-model`` or ``--usage-gpu-model`` says it), the usage's body, the
costs (read for the pool's model), the advice and the check; only then is anything written.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from pathlib import Path

from sharebench.advise.advice import AdviseOptions, advise, headline
from sharebench.advise.check import CheckOptions, CheckResult, check, write_check
from sharebench.advise.costread import read_costs
from sharebench.advise.options import ClassChoice, check_out, parse_classes
from sharebench.advise.prometheus import Window, read_prometheus
from sharebench.advise.reading import read_header, read_usage_csv
from sharebench.advise.render import write_advice
from sharebench.advise.usage import MODEL_COLUMN, Usage, class_patterns, parse_time
from sharebench.errors import UserError
from sharebench.parse import check_slo

NO_MODEL = (
    "give --gpu-model MODEL (the pool's GPU model) or --usage-gpu-model MODEL (the one the usage ran on); "
    "advise packs memory and costs sharing for one GPU model"
)


def read_usage(args: argparse.Namespace) -> Usage:
    """The usage (a CSV's header checked before its body); one that names no GPU model is refused unless said."""
    named = bool(args.gpu_model or args.usage_gpu_model)
    if args.usage:
        path = Path(args.usage)
        if MODEL_COLUMN not in read_header(path) and not named:
            raise UserError(f"--usage {path} names no GPU model (no {MODEL_COLUMN} column); {NO_MODEL}")
        usage = read_usage_csv(path, gpu_model_name=args.usage_gpu_model)
    else:
        until = parse_time(args.until, "--until") if args.until else time.time()
        since = parse_time(args.since, "--since") if args.since else until - 86_400
        window = Window(since, until, float(args.step))
        usage = read_prometheus(args.prometheus, window, args.class_label, args.usage_gpu_model)
    if usage.gpu_model is None and not named:
        raise UserError(f"the usage names no GPU model (an empty {MODEL_COLUMN}, no modelName label); {NO_MODEL}")
    return usage


def known_classes(usage: Usage, choices: dict[str, ClassChoice]) -> None:
    names = usage.class_names()
    for name in choices:
        if name not in names:
            raise UserError(f"--class {name}=…: no pod of class {name!r}; classes: {', '.join(names)}")


def cmd_advise(args: argparse.Namespace) -> int:
    slo = check_slo(args.slo)
    choices = parse_classes(args.classes)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else Path("sharebench-advice") / stamp
    check_out(out, args.force)
    usage = read_usage(args)
    known_classes(usage, choices)
    folders = [*(args.results or []), *(str(c.results) for c in choices.values() if c.results)]
    costs = read_costs(folders, args.gpu_model or usage.gpu_model, args.allow_other_model, slo)
    patterns = class_patterns(usage, {n: c.pattern for n, c in choices.items() if c.pattern})
    how = AdviseOptions(args.allow_other_model, bool(args.gpu_model), args.memory_headroom, choices, args.force)
    result = advise(usage, costs, patterns, slo, how)
    got: CheckResult | None = None
    if args.check is not None:
        overrides = {n: c.pattern for n, c in choices.items() if c.pattern}
        got = check(usage, costs, overrides, slo, CheckOptions(args.check, args.allow_other_model, how))
    print(f"read: {result.read['usage']}")
    print(f"costs: {result.read['costs']}; pool: {result.pool.describe()}")
    for w in result.warnings:
        print(w)
    paths = write_advice(result, out, force=args.force)
    print("\n".join(headline(result)))
    if got is not None:
        print("\n".join(got.lines()))
        print(f"wrote {write_check(got, out)}")
    print(f"wrote {paths['md']}, {paths['html']}, {paths['json']}, {paths['csv']}")
    return 1 if got is not None and not got.passed else 0
