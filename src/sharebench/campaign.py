"""Campaigns as plans: one runner reads a plan file (TOML) and runs its steps, each a sweep
(``sharebench run``) into its own folder of the campaign folder or a plain command (a tool, a profile).

A plan (``benchmarks/plans/*.toml`` are the committed campaigns)::

    name = "headline"
    description = "..."
    device = "cuda:0"                 # --device overrides
    lattice = ".devcarry/lhc_simpletrack_7tev.json.gz"   # optional; --lattice PATH|none overrides
    budget_s = 230                    # optional; --budget overrides: no new cell once it is spent
    report = true                     # rebuild each sweep folder's report at the end (default false)
    warm = { particles = 2e6, turns = 3 }   # optional: one untimed track first (clocks, caches)

    [[step]]                          # a sweep: its folder is <out>/<name>
    name = "smoke"
    tags = ["smoke"]                  # --steps picks steps by name or tag
    modes = ["exclusive", "timeslice:2"]
    particles = [1e6]                 # --particles (work sizes for engine = "exec")
    turns = 1
    repeats = 1
    warmup_repeats = 0                # default 0
    smoke = true                      # stop the campaign (exit 3) unless every cell is ok
    margin_s = 60                     # start no new cell this long before the budget ends (default 0)
    min_left_s = 5                    # skip the step when less budget is left (default 5)
    # optional: engine ("simpletrack", "xtrack", "exec"), exec, exec_name, exec_timing,
    # ready_timeout_s, fresh_replicas, use_lattice (default true);
    # how the replicas work (issue 23): pattern = "interactive:burst=10,think=0.5", neighbours = "batch",
    # bursts = 30, slo = 2; within a budget (issue 24, no repeats then): budget = "10m", precision = 0.5,
    # max_repeats = 10; users per GPU by search (issue 33): modes naming families without N
    # (["timeslice", "mps"]) with capacity = true, users = "2..32", repeats (per N, default 2) and
    # max_repeats (default 4), a budget too; timeslice_probe = false (--no-probe); awake_control = true
    # (--awake-control: each alone cell also beside a keep-awake process, with a pattern)
    budget_s = 330                    # optional: the step's own wall time: no new cell after it (its report
                                      # included), never past the plan's budget
    predict_s = 60                    # optional: first the step's dry run (at most this long), its output
                                      # kept in <out>/dry_<name>.txt (the prediction, before the step)

    [[step]]                          # a command: argv with {python} {out} {device} {lattice}
    name = "overhead"
    run = ["{python}", "-m", "tools.cell_overhead", "{out}/smoke"]
    stdout = "{out}/cell_overhead.txt"   # optional, with append = true to add to it
    # optional: timeout_s, optional (a failure does not count), needs (a program that must be on PATH)

Every step that runs gets a row in ``<out>/walls.csv`` (``step,start,end,status``: Unix seconds from before
its process starts to after it exits, its exit status), which ``python -m tools.time_to_answer`` reads
beside the ``dry_<name>.txt`` predictions. ``--dry-run`` ends with the plan's total: the sum of the steps'
limits (``predict_s`` + ``budget_s`` of a sweep, ``timeout_s`` of a command), or which steps have none.

A sweep step is parsed here into the same value the command line builds for ``sharebench run``
(:class:`sharebench.sweep.request.SweepRequest`) and run by the runner the caller gives
(``sharebench.cli.campaign_cmd``: ``sharebench.cli.sweep_cmd.run_in_child``), never through argv;
``commands.txt`` and the dry run show the equivalent command line, for the record.

The device set-up (wheels, PYTHONPATH, the LHC line) stays a shell script the device command sources
first (``benchmarks/device_setup.sh``). Every command run is appended to ``<out>/commands.txt``; the
machine (UTC time, host, the GPU's name, UUID, driver, MIG mode and clock) to ``<out>/machine.txt``.
A folder that already holds results is continued (``--resume``).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sharebench.analysis.latency import check_slo
from sharebench.analysis.sequential import MIN_REPEATS
from sharebench.devices import resolve_device
from sharebench.errors import UserError
from sharebench.kernel import RunConfig
from sharebench.modes import Mode
from sharebench.parse import counts, whole_number
from sharebench.patterns import parse_pattern
from sharebench.sharing import plan_cell
from sharebench.sweep import as_modes
from sharebench.sweep.budget import REPORT_S, BudgetOptions, budget_options
from sharebench.sweep.capacity import (
    DEFAULT_MAX_REPEATS,
    DEFAULT_MIN_REPEATS,
    CapacityOptions,
    families_of,
    parse_users,
)
from sharebench.sweep.request import SweepRequest, command_line, shell_line
from sharebench.workloads.workload import MAX_BURSTS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SMOKE_FAILED = 3  # the exit status when a smoke step's cell failed
PLAN_KEYS = ("name", "description", "device", "lattice", "budget_s", "report", "warm", "step")
SWEEP_KEYS = (
    "name", "tags", "modes", "particles", "turns", "repeats", "warmup_repeats", "smoke", "margin_s",
    "min_left_s", "engine", "exec", "exec_name", "exec_timing", "ready_timeout_s", "fresh_replicas",
    "use_lattice", "pattern", "neighbours", "bursts", "slo", "budget", "precision", "max_repeats",
    "capacity", "users", "timeslice_probe", "budget_s", "predict_s", "awake_control",
)  # fmt: skip
COMMAND_KEYS = ("name", "tags", "run", "stdout", "append", "timeout_s", "optional", "needs", "min_left_s")
ENGINES = ("simpletrack", "xtrack", "exec")
GPU_QUERY = "name,uuid,memory.total,driver_version,mig.mode.current,clocks.max.sm"
WALLS_CSV = "walls.csv"  # each step's wall time: step,start,end,status (tools/time_to_answer.py reads it)
WALLS_COLUMNS = ("step", "start", "end", "status")
PREDICTION_STOPPED = 124  # a dry run's status when it ran past its predict_s (as timeout(1) says)
# how a user gets the committed plans' lattice (a clone has no .devcarry/)
LATTICE_HOWTO = (
    "the plans' LHC line is the original Simpletrack benchmark's (github.com/rdemaria/simpletrack, "
    "examples/lhc/line.bin) as an Xsuite line JSON.gz, which sharebench does not ship: put it at that path, "
    "give --lattice FILE (any Xsuite line), or --lattice none (the generated ring of the same element mix)"
)


class CampaignStopped(Exception):
    """A smoke step found a failed cell: the campaign stops before the long steps."""


@dataclass(frozen=True)
class Sweep:
    """One ``sharebench run`` into ``<out>/<name>``."""

    name: str
    modes: tuple[Mode, ...]
    particles: tuple[int, ...]
    turns: int
    repeats: int | None  # None: a budget plans them
    tags: tuple[str, ...] = ()
    warmup_repeats: int = 0
    smoke: bool = False
    margin_s: float = 0.0
    min_left_s: float = 5.0
    engine: str | None = None
    exec: str | None = None
    exec_name: str | None = None
    exec_timing: str | None = None
    ready_timeout_s: float | None = None
    fresh_replicas: bool = False
    use_lattice: bool = True
    pattern: str | None = None  # --pattern, --neighbours, --bursts, --slo (sharebench.patterns)
    neighbours: str | None = None
    bursts: int | None = None
    slo: float | None = None
    budget: str | None = None  # --budget, --precision, --max-repeats (sharebench.sweep.budget)
    precision: float | None = None
    max_repeats: int | None = None
    budget_options: BudgetOptions | None = None  # the three above, parsed
    capacity: CapacityOptions | None = None  # --capacity --users: the search (modes: its families' start)
    timeslice_probe: bool = True
    awake_control: bool = False  # --awake-control: each alone cell also beside a keep-awake process
    budget_s: float | None = None  # the step's own wall time (--stop-after, its report included)
    predict_s: float | None = None  # its dry run first, at most this long, into dry_<name>.txt

    def runs(self) -> str:
        """What the dry run says the step measures."""
        cells = len(self.modes) * len(self.particles)
        within = "" if self.budget is None else f" within --budget {self.budget}"
        if self.capacity is not None:
            c = self.capacity
            return (f"users per GPU by search of {', '.join(c.families)}, N {c.users[0]}..{c.users[1]}, "
                    f"{c.min_repeats}..{c.max_repeats} repeats per N{within}")  # fmt: skip
        if self.budget is None:
            return f"{cells} cells x {self.repeats} repeats"
        return f"up to {cells} cells{within}, repeats while unsettled"

    def limit_s(self) -> float | None:
        """The most wall time the step takes by its own keys (prediction and budget), None: unbounded."""
        return None if self.budget_s is None else self.budget_s + (self.predict_s or 0.0)


@dataclass(frozen=True)
class Command:
    """A plain command (a tool, a profile); its placeholders are filled when it runs."""

    name: str
    run: tuple[str, ...]
    tags: tuple[str, ...] = ()
    stdout: str | None = None
    append: bool = False
    timeout_s: float | None = None
    optional: bool = False
    needs: str | None = None
    min_left_s: float = 0.0

    def limit_s(self) -> float | None:
        return self.timeout_s


Step = Sweep | Command


@dataclass(frozen=True)
class Plan:
    """A campaign: where it runs and its steps, in order."""

    name: str
    steps: tuple[Step, ...]
    description: str = ""
    device: str = "cuda:0"
    lattice: str | None = None
    budget_s: float | None = None
    report: bool = False
    warm: tuple[int, int] | None = None  # (particles, turns) of the untimed first track


# ---------------------------------------------------------------- reading a plan
def load_plan(path: str | Path) -> Plan:
    """The plan in ``path``; a missing file, bad TOML or a bad value is a one-line ``UserError``."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"plan {str(p)!r} does not exist; give a TOML plan file (see benchmarks/plans/)")
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"plan {p}: not valid TOML: {exc}") from None
    try:
        return parse_plan(data, default_name=p.stem)
    except UserError as exc:
        raise UserError(f"plan {p}: {exc}") from None


def parse_plan(data: Mapping[str, Any], default_name: str = "campaign") -> Plan:
    """A :class:`Plan` from the TOML document ``data``."""
    unknown(data, PLAN_KEYS, "key")
    raw_steps = data.get("step")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise UserError("no [[step]]; a plan needs at least one step (a sweep with modes, or a command with run)")
    steps = tuple(parse_step(s, i) for i, s in enumerate(raw_steps))
    names = [s.name for s in steps]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UserError(f"step names must differ (each sweep is a folder): {', '.join(dup)} repeated")
    warm = data.get("warm")
    if warm is not None:
        if not isinstance(warm, dict):
            raise UserError(f"bad warm {warm!r}; allowed: a table {{ particles = N, turns = N }}")
        unknown(warm, ("particles", "turns"), "warm key")
        warm = (counts("warm particles", [warm.get("particles", 2_000_000)])[0], turns_of("warm", warm.get("turns", 3)))
    return Plan(
        name=text(data, "name", "plan") or default_name,
        description=text(data, "description", "plan") or "",
        device=text(data, "device", "plan") or "cuda:0",
        lattice=text(data, "lattice", "plan"),
        budget_s=seconds(data, "budget_s", "plan"),
        report=flag(data, "report", "plan"),
        warm=warm,
        steps=steps,
    )


def parse_step(raw: Any, index: int) -> Step:
    """One ``[[step]]``: a sweep (it has ``modes``) or a command (it has ``run``)."""
    if not isinstance(raw, dict):
        raise UserError(f"step {index + 1} is not a table")
    name = raw.get("name")
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise UserError(f"step {index + 1}: bad name {name!r}; allowed: a folder name (no '/')")
    where = f"step {name!r}"
    tags = raw.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise UserError(f"{where}: bad tags {tags!r}; allowed: a list of strings")
    if ("modes" in raw) == ("run" in raw):
        raise UserError(f"{where}: give either modes (a sweep) or run (a command)")
    if "run" in raw:
        return parse_command(raw, name, tuple(tags), where)
    return parse_sweep(raw, name, tuple(tags), where)


def parse_sweep(raw: Mapping[str, Any], name: str, tags: tuple[str, ...], where: str) -> Sweep:
    unknown(raw, SWEEP_KEYS, f"{where} key")
    raw_modes = raw["modes"]
    if not isinstance(raw_modes, list) or not all(isinstance(m, str) for m in raw_modes):
        raise UserError(f"{where}: bad modes {raw_modes!r}; allowed: a list of mode strings")
    capacity = capacity_of(raw, raw_modes, where)
    if capacity is None:
        modes = as_modes(raw_modes)  # a bad mode names itself and what is allowed
    else:  # the families searched start at the smallest N (what the sweep checks before it runs)
        modes = as_modes([*families_of(raw_modes)[1], *(m.label for m in capacity.start_modes())])
    engine = text(raw, "engine", where)
    if engine is not None and engine not in ENGINES:
        raise UserError(f"{where}: bad engine {engine!r}; allowed: {', '.join(ENGINES)}")
    if (engine == "exec") != ("exec" in raw):
        raise UserError(f'{where}: exec (the program) goes with engine = "exec", and only with it')
    return Sweep(
        name=name,
        tags=tags,
        modes=modes,
        particles=tuple(counts(f"{where} particles", need(raw, "particles", where))),
        turns=turns_of(where, need(raw, "turns", where)),
        repeats=capacity.min_repeats if capacity is not None else repeats_of(raw, where),
        warmup_repeats=whole_number(f"{where} warmup_repeats", raw.get("warmup_repeats", 0), 0, 1000),
        smoke=flag(raw, "smoke", where),
        margin_s=seconds(raw, "margin_s", where) or 0.0,
        min_left_s=seconds(raw, "min_left_s", where, 5.0) or 0.0,
        engine=engine,
        exec=text(raw, "exec", where),
        exec_name=text(raw, "exec_name", where),
        exec_timing=text(raw, "exec_timing", where),
        ready_timeout_s=seconds(raw, "ready_timeout_s", where),
        fresh_replicas=flag(raw, "fresh_replicas", where),
        use_lattice=flag(raw, "use_lattice", where, True),
        capacity=capacity,
        timeslice_probe=flag(raw, "timeslice_probe", where, True),
        awake_control=awake_of(raw, where),
        budget_s=positive_seconds(raw, "budget_s", where),
        predict_s=positive_seconds(raw, "predict_s", where),
        **pattern_keys(raw, where, modes),
        **budget_keys(raw, where, search=capacity is not None),
    )


def awake_of(raw: Mapping[str, Any], where: str) -> bool:
    """``awake_control`` (``run --awake-control``): it needs a replica pattern (the alone cells it controls)."""
    awake = flag(raw, "awake_control", where)
    pattern = raw.get("pattern")
    try:
        patterned = isinstance(pattern, str) and not parse_pattern(pattern).saturated
    except UserError:
        return awake  # a bad pattern: pattern_keys names it
    if awake and not patterned:
        raise UserError(
            f"{where}: awake_control needs a replica pattern (pattern): its control is a pattern's alone cell"
        )
    return awake


def capacity_of(raw: Mapping[str, Any], raw_modes: list[str], where: str) -> CapacityOptions | None:
    """``capacity``, ``users`` and the repeats of each N, as ``sharebench run --capacity`` takes them: a mode
    family without N in ``modes`` (``timeslice``, ``mps``) is searched; None when none is."""
    try:
        families = families_of(raw_modes)[0]  # a bad family's interval or share: its one-line error
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    if not families:
        if flag(raw, "capacity", where):
            raise UserError(
                f"{where}: capacity needs a mode family without N in modes (a sharing kind alone, such as mps)"
            )
        if "users" in raw:
            raise UserError(f"{where}: users goes with capacity (a mode family without N in modes)")
        return None
    low = whole_number(f"{where} repeats", raw.get("repeats", DEFAULT_MIN_REPEATS), 1, 1000)
    high = whole_number(f"{where} max_repeats", raw.get("max_repeats", DEFAULT_MAX_REPEATS), 1, 1000)
    try:
        return CapacityOptions(tuple(families), parse_users(text(raw, "users", where)), low, max(low, high))
    except UserError as exc:
        raise UserError(f"{where}: {str(exc).replace('--users', 'users')}") from None


def positive_seconds(table: Mapping[str, Any], key: str, where: str) -> float | None:
    value = seconds(table, key, where)
    if value == 0:
        raise UserError(f"{where}: bad {key} 0; allowed: a number of seconds > 0")
    return value


def repeats_of(raw: Mapping[str, Any], where: str) -> int | None:
    """``repeats``: required, unless a ``budget`` plans them (then refused)."""
    if "budget" in raw:
        if "repeats" in raw:
            raise UserError(
                f"{where}: repeats goes without budget (a budget plans its repeats: at least {MIN_REPEATS}, then "
                "while unsettled up to max_repeats)"
            )
        return None
    return whole_number(f"{where} repeats", need(raw, "repeats", where), 1, 1000)


def pattern_keys(raw: Mapping[str, Any], where: str, modes: tuple[Mode, ...]) -> dict[str, Any]:
    """``pattern``, ``neighbours``, ``bursts``, ``slo``: checked as ``sharebench run`` checks them."""
    keys: dict[str, Any] = {}
    try:
        for key in ("pattern", "neighbours"):
            value = text(raw, key, where)
            if value is not None:
                parse_pattern(value)
                keys[key] = value
        if "bursts" in raw:
            keys["bursts"] = whole_number(f"{where} bursts", number(raw, "bursts", where), 1, MAX_BURSTS)
        if "slo" in raw:
            keys["slo"] = check_slo(number(raw, "slo", where))
    except UserError as exc:
        raise UserError(str(exc) if str(exc).startswith(where) else f"{where}: {exc}") from None
    if "neighbours" in keys and all(m.is_baseline for m in modes):
        raise UserError(f"{where}: neighbours needs a sharing mode (timeslice:N, mps:N, ...) among the modes")
    return keys


def budget_keys(raw: Mapping[str, Any], where: str, search: bool = False) -> dict[str, Any]:
    """``budget`` (a duration: "90s", "10m"), ``precision`` (points > 0), ``max_repeats`` (>= 3): checked as
    ``sharebench run --budget`` checks them; precision and max_repeats go with a budget. ``search``: a
    capacity search's step, whose max_repeats is the search's (repeats of each N)."""
    own = ("precision",) if search else ("precision", "max_repeats")
    if "budget" not in raw:
        extra = [k for k in own if k in raw]
        if extra:
            verb = "goes" if len(extra) == 1 else "go"
            raise UserError(f'{where}: {" and ".join(extra)} {verb} with budget (a duration such as "10m")')
        return {}
    budget = text(raw, "budget", where)
    kw = {k: raw[k] for k in own if k in raw}
    if any(isinstance(v, (bool, str)) or not isinstance(v, (int, float)) for v in kw.values()):
        bad = next(k for k, v in kw.items() if isinstance(v, (bool, str)) or not isinstance(v, (int, float)))
        raise UserError(f"{where}: bad {bad} {kw[bad]!r}; allowed: a number")
    try:
        opts = budget_options(budget, **kw)
    except UserError as exc:
        msg = str(exc).replace("--max-repeats", "max_repeats").replace("--precision", "precision")
        raise UserError(f"{where}: {msg.replace('--budget', 'budget')}") from None
    return {
        "budget": budget,
        "precision": opts.precision if "precision" in raw else None,
        "max_repeats": opts.max_repeats if "max_repeats" in kw else None,
        "budget_options": opts,
    }


def number(table: Mapping[str, Any], key: str, where: str) -> Any:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{where}: bad {key} {value!r}; allowed: a number")
    return value


def parse_command(raw: Mapping[str, Any], name: str, tags: tuple[str, ...], where: str) -> Command:
    unknown(raw, COMMAND_KEYS, f"{where} key")
    run = raw["run"]
    if not isinstance(run, list) or not run or not all(isinstance(a, str) for a in run):
        raise UserError(f"{where}: bad run {run!r}; allowed: a non-empty list of strings (argv, no shell)")
    return Command(
        name=name,
        tags=tags,
        run=tuple(run),
        stdout=text(raw, "stdout", where),
        append=flag(raw, "append", where),
        timeout_s=seconds(raw, "timeout_s", where),
        optional=flag(raw, "optional", where),
        needs=text(raw, "needs", where),
        min_left_s=seconds(raw, "min_left_s", where) or 0.0,
    )


def unknown(table: Mapping[str, Any], allowed: tuple[str, ...], what: str) -> None:
    extra = [k for k in table if k not in allowed]
    if extra:
        raise UserError(f"unknown {what} {extra[0]!r}; allowed: {', '.join(allowed)}")


def need(table: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in table:
        raise UserError(f"{where}: {key} is missing")
    return table[key]


def text(table: Mapping[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise UserError(f"{where}: bad {key} {value!r}; allowed: a string")
    return value


def flag(table: Mapping[str, Any], key: str, where: str, default: bool = False) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise UserError(f"{where}: bad {key} {value!r}; allowed: true or false")
    return value


def seconds(table: Mapping[str, Any], key: str, where: str, default: float | None = None) -> float | None:
    value = table.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise UserError(f"{where}: bad {key} {value!r}; allowed: a number of seconds >= 0")
    return float(value)


def turns_of(where: str, value: Any) -> int:
    return whole_number(f"{where} turns", value, 1)


# ---------------------------------------------------------------- choosing and overriding
def select(plan: Plan, names: list[str] | None) -> Plan:
    """The plan with only the steps named (by name or tag) in ``names``; all of them when None."""
    if not names:
        return plan
    known = {s.name for s in plan.steps} | {t for s in plan.steps for t in s.tags}
    bad = [n for n in names if n not in known]
    if bad:
        raise UserError(f"no step or tag {bad[0]!r} in plan {plan.name}; allowed: {', '.join(sorted(known))}")
    wanted = set(names)
    return replace(plan, steps=tuple(s for s in plan.steps if s.name in wanted or wanted & set(s.tags)))


# ---------------------------------------------------------------- the commands of a plan
@dataclass
class Context:
    """Where a campaign runs: its folder, the Python that runs sharebench, the budget's start."""

    out: Path
    plan: Plan
    python: str = sys.executable
    t0: float = field(default_factory=time.monotonic)
    dry_run: bool = False
    runner: Runner | None = None  # None: a dry run, which runs nothing
    report_s: float = REPORT_S  # one report's time: the slowest built so far in this campaign, at least REPORT_S

    def left_s(self) -> float | None:
        """Seconds of the budget still to spend (None: no budget)."""
        if self.plan.budget_s is None:
            return None
        return self.plan.budget_s - (0.0 if self.dry_run else time.monotonic() - self.t0)

    def fill(self, arg: str) -> str:
        lattice = self.plan.lattice or ""
        return arg.format(python=self.python, out=str(self.out), device=self.plan.device, lattice=lattice)


def lattice_args(ctx: Context, use: bool = True) -> list[str]:
    return ["--lattice", ctx.plan.lattice] if use and ctx.plan.lattice else []


def warm_run(ctx: Context) -> RunConfig | None:
    """The untimed first track (brings the GPU out of idle clocks, fills the caches), or None: the run
    value itself, handed to the runner (never an argv for sharebench)."""
    if ctx.plan.warm is None:
        return None
    particles, turns = ctx.plan.warm
    return RunConfig(device=ctx.plan.device, lattice=ctx.plan.lattice, particles=particles, turns=turns)


def warm_text(run: RunConfig) -> str:
    """The warm-up as ``--dry-run`` shows it (the equivalent command, for the record, never run)."""
    words = ["sharebench", "track", "--device", run.device, *(["--lattice", run.lattice] if run.lattice else [])]
    return shell_line([*words, "--particles", str(run.particles), "--turns", str(run.turns)])


def sweep_request(ctx: Context, step: Sweep, stop_after_s: float | None) -> SweepRequest:
    """The sweep of ``step``, as the command line would build it for ``sharebench run`` (a resumed run
    when its folder already holds results); ``stop_after_s``: the budget left to it."""
    folder = ctx.out / step.name
    workload = {
        "device": ctx.plan.device,
        "lattice": ctx.plan.lattice if step.use_lattice else None,
        "engine": step.engine,
        "command": ctx.fill(step.exec) if step.exec is not None else None,
        "name": ctx.fill(step.exec_name) if step.exec_name is not None else None,
        "timing": ctx.fill(step.exec_timing) if step.exec_timing is not None else None,
        "pattern": step.pattern,
        "neighbours": step.neighbours,
        "bursts": step.bursts,
    }
    request = SweepRequest(
        out=folder,
        modes=step.modes,
        particles=step.particles,
        turns=step.turns,
        repeats=step.repeats,
        warmup_repeats=step.warmup_repeats,
        workload=workload,
        ready_timeout_s=step.ready_timeout_s,
        stop_after_s=float(int(stop_after_s)) if stop_after_s is not None else None,
        slo=step.slo,
        resume=(folder / "results.csv").is_file(),
        budget=step.budget_options,
        progress=False,
        fresh_replicas=step.fresh_replicas,
        timeslice_probe=step.timeslice_probe,
        capacity=step.capacity,
        awake_control=step.awake_control,
    )
    return replace(request, command=tuple(recorded_command(request, step, ctx.python)))


def recorded_command(request: SweepRequest, step: Sweep, python: str) -> list[str]:
    """The ``sharebench run`` command of ``request`` for the record, with what ``command_line`` leaves to
    the request value: the capacity search (its families, ``--capacity --users --max-repeats``), ``--no-probe``."""
    words = command_line(request, python)
    c = step.capacity
    if c is not None:
        start = c.start_modes()
        words[words.index("--modes") + 1] = ",".join([*(m.label for m in step.modes if m not in start), *c.families])
        words += ["--capacity", "--users", f"{c.users[0]}..{c.users[1]}", "--max-repeats", str(c.max_repeats)]
    return words + ([] if step.timeslice_probe else ["--no-probe"])


def stop_after(ctx: Context, step: Sweep | Command) -> tuple[bool, float | None]:
    """(run it?, --stop-after): a step is skipped when less than its ``min_left_s`` of the plan's budget is
    left; a sweep stops starting cells when the plan's budget (less its margin and the reports) or its own
    ``budget_s`` (less its report) is spent."""
    own = max(step.budget_s - ctx.report_s, 0.0) if isinstance(step, Sweep) and step.budget_s is not None else None
    left = ctx.left_s()
    if left is None:
        return True, own
    margin = step.margin_s + report_reserve_s(ctx) if isinstance(step, Sweep) else 0.0
    return left - margin >= step.min_left_s, left - margin if own is None else min(left - margin, own)


def report_reserve_s(ctx: Context) -> float:
    """The time a sweep step leaves for reports within the campaign's budget: its own report, and with
    ``report = true`` the campaign's final report of every sweep folder (``ctx.report_s`` each)."""
    pending = sum(isinstance(s, Sweep) for s in ctx.plan.steps) if ctx.plan.report else 0
    return ctx.report_s * (1 + pending)


def describe(
    plan: Plan, out: Path, python: str = sys.executable, estimates: Mapping[str, float] | None = None
) -> list[str]:
    """``--dry-run``: the commands a plan runs, one a line (the budget as if no time were spent), then the
    total; ``estimates``: the seconds a step without a limit is predicted to take (:func:`estimate_steps`)."""
    ctx = Context(out=out, plan=plan, python=python, dry_run=True)
    lines = [f"# campaign {plan.name}: {plan.description}".rstrip(": ")]
    if plan.budget_s is not None:
        lines.append(f"# budget: {plan.budget_s:g} s (--stop-after below: as if none were spent)")
    warm = warm_run(ctx)
    if warm is not None:
        lines.append(warm_text(warm) + "   # untimed warm-up")
    for step in plan.steps:
        go, stop = stop_after(ctx, step)
        skip = "" if go else "   # skipped: budget too small"
        if isinstance(step, Sweep):
            lines.append(
                shell_line(list(sweep_request(ctx, step, stop).command or ())) + (skip or sweep_note(ctx, step))
            )
        else:
            redirect = f" {'>>' if step.append else '>'} {ctx.fill(step.stdout)}" if step.stdout else ""
            limit = f"   # at most {step.timeout_s:g} s" if step.timeout_s is not None else ""
            lines.append(shell_line([ctx.fill(a) for a in step.run]) + redirect + (skip or limit))
    return [*lines, total_line(plan, estimates)]


def sweep_note(ctx: Context, step: Sweep) -> str:
    note = f"   # {step.name}: {step.runs()}" + (", smoke" if step.smoke else "")
    note += f"; at most {step.budget_s:g} s" if step.budget_s is not None else ""
    if step.predict_s is not None:
        note += f"; its dry run first (at most {step.predict_s:g} s) into {prediction_file(ctx, step)}"
    return note


def total_line(plan: Plan, estimates: Mapping[str, float] | None = None) -> str:
    """The plan's total wall time by its steps' limits (a sweep's ``predict_s`` + ``budget_s``, a command's
    ``timeout_s``), the ``estimates`` of the steps without one (their own dry runs, :func:`estimate_steps`) and
    its ``budget_s`` (after which no sweep starts a cell): ``at most N s`` when every step is bounded, ``about
    N s`` when some are estimated, else ``at least N s`` from the rest and the steps with neither named."""
    known = dict(estimates or {})
    limits = {s.name: s.limit_s() for s in plan.steps}
    sweeps = [s for s in plan.steps if isinstance(s, Sweep)]
    commands = [s for s in plan.steps if isinstance(s, Command)]
    # a sweep without a limit of its own: the plan's budget bounds it, else its dry run's estimate
    sweeps_s = sum(limits[s.name] or plan.budget_s or known.get(s.name, 0.0) for s in sweeps)
    if plan.budget_s is not None:  # the sweeps all stop within the plan's budget; the commands only by timeout_s
        sweeps_s = min(sweeps_s, plan.budget_s)
    total = sweeps_s + sum(limits[s.name] or 0.0 for s in commands)
    unbounded = [s.name for s in sweeps if limits[s.name] is None and plan.budget_s is None]
    unbounded += [s.name for s in commands if limits[s.name] is None]
    free = [n for n in unbounded if n not in known]
    budget = "" if plan.budget_s is None else f"; no new cell after the plan's budget_s {plan.budget_s:g} s"
    basis = "by the steps' limits (budget_s + predict_s of a sweep, timeout_s of a command)"
    guessed = [n for n in unbounded if n in known]
    if guessed:
        basis += f" and the dry runs on this machine of {', '.join(f'{n} ({known[n]:.0f} s)' for n in guessed)}"
    if free:
        return (
            f"# total: at least {total:.0f} s {basis}{budget}; not bounded: {', '.join(free)} without budget_s "
            "(a sweep) or timeout_s (a command), not estimated here: give one, or dry-run on the device"
        )
    warm = "the warm-up, " if plan.warm is not None else ""
    word = "about" if guessed else "at most"
    return f"# total: {word} {total:.0f} s {basis}{budget} (and {warm}a cell started before a deadline)"


PREDICTED = re.compile(r"^predicted: (\d+(?:\.\d+)?) s", re.MULTILINE)
ESTIMATE_S = 300.0  # the longest a step's own dry run may take in a campaign's dry run (its predict_s if given)


def estimate_steps(
    plan: Plan,
    out: Path,
    predict: Callable[[SweepRequest, Path, float], int],
    folder: Path,
    python: str = sys.executable,
) -> dict[str, float]:
    """The seconds each sweep step without a limit (no ``budget_s``, and no plan budget) is predicted to take:
    its own dry run (``sharebench run ... --dry-run``, through ``predict``, into ``folder``) and its
    ``predicted: N s`` line. Only the steps whose modes run on the device here; one whose dry run says
    nothing is left out (the total then names it)."""
    if plan.budget_s is not None:
        return {}
    runnable = runnable_sweeps(plan)
    ctx = Context(out=out, plan=plan, python=python, dry_run=True)
    found: dict[str, float] = {}
    for step in runnable or []:
        if step.limit_s() is not None:
            continue
        request = replace(sweep_request(ctx, step, None), dry_run=True)
        path = folder / f"dry_{step.name}.txt"
        predict(request, path, step.predict_s or ESTIMATE_S)
        said = PREDICTED.search(path.read_text(errors="replace")) if path.is_file() else None
        if said:
            found[step.name] = float(said.group(1))
    return found


def runnable_sweeps(plan: Plan) -> list[Sweep] | None:
    """The sweep steps whose modes all run on the plan's device here; None when the device is not here."""
    try:
        device = resolve_device(plan.device)
    except UserError:
        return None
    out = []
    for step in (s for s in plan.steps if isinstance(s, Sweep)):
        try:
            for m in step.modes:
                plan_cell(m, device)
        except UserError:
            continue
        out.append(step)
    return out


def uses_lattice(plan: Plan) -> bool:
    """Whether anything the plan runs reads its lattice: the warm-up, a tracker step, a ``{lattice}``."""
    sweeps = any(isinstance(s, Sweep) and s.use_lattice and s.engine != "exec" for s in plan.steps)
    commands = any(isinstance(s, Command) and any("{lattice}" in a for a in s.run) for s in plan.steps)
    return plan.warm is not None or sweeps or commands


def check_plan(plan: Plan, *, here: bool = True) -> list[str]:
    """What a plan needs, checked before anything runs: its lattice file, and every sweep step's modes
    against its device (``sharing.plan_cell``: MPS and MIG need an NVIDIA GPU). ``here`` (a run): the first
    problem is a one-line UserError. A dry run (``here=False``) lists them as ``# `` notes instead, the
    run's refusals to come, and notes a device this machine lacks (its modes unchecked); it ends with a
    :class:`NoStepRuns` when the device is here and none of the plan's sweeps can run on it."""
    problems = []
    if plan.lattice and uses_lattice(plan) and not Path(plan.lattice).is_file():
        problems.append(f"plan lattice {plan.lattice!r} not found; {LATTICE_HOWTO}")
    try:
        device = resolve_device(plan.device)
    except UserError as exc:
        if here:
            raise
        notes = [f"# not runnable as planned: {p}" for p in problems]
        return [*notes, f"# modes not checked against {plan.device} here: {exc}"]
    sweeps = [s for s in plan.steps if isinstance(s, Sweep)]
    refused = 0
    for step in sweeps:
        for m in step.modes:
            try:
                plan_cell(m, device)
            except UserError as exc:
                problems.append(f"step {step.name}: {exc}; leave the step out (--steps) or give another --device")
                refused += 1
                break
    if problems and here:
        raise UserError(problems[0])
    notes = [f"# not runnable as planned: {p}" for p in problems]
    if sweeps and refused == len(sweeps):
        raise NoStepRuns(notes, f"no step of plan {plan.name} can run on {plan.device} ({device.name})")
    return notes


class NoStepRuns(Exception):
    """A dry run's plan of which no sweep step can run on the device here: its notes, and why."""

    def __init__(self, notes: list[str], why: str) -> None:
        super().__init__(why)
        self.notes, self.why = notes, why


# ---------------------------------------------------------------- running a plan
Say = Callable[[str], None]


@dataclass(frozen=True)
class Runner:
    """What runs a campaign's sweeps: ``sweep`` runs one request (as ``sharebench run`` does: the sweep,
    its report, its end screen) and returns its exit status; ``report`` rebuilds a folder's report;
    ``warm`` runs the plan's untimed warm-up track (its outcome ignored; None: no warm-up); ``predict`` runs
    a request's dry run with its output into a file, stopped after the seconds given, and returns its exit
    status (None: a step's ``predict_s`` is not run)."""

    sweep: Callable[[SweepRequest], int]
    report: Callable[[Path], None]
    warm: Callable[[RunConfig], None] | None = None
    predict: Callable[[SweepRequest, Path, float], int] | None = None  # a dry run into the file, at most S s


def run_campaign(plan: Plan, out: Path, runner: Runner, say: Say = print) -> int:
    """Run every step of ``plan`` into ``out``; 0 when all went well, 1 when a step failed.
    Raises :class:`CampaignStopped` when a smoke step found a failed cell."""
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(out=out, plan=plan, runner=runner)
    record_machine(ctx)
    warm = warm_run(ctx)
    if warm is not None and runner.warm is not None:
        runner.warm(warm)
    failed = []
    for step in plan.steps:
        say(f"== {step.name} at {time.monotonic() - ctx.t0:.0f} s")
        go, _ = stop_after(ctx, step)
        if not go:
            log_command(ctx, f"skipped {step.name}: budget spent")
            say(f"skipped {step.name}: budget spent")
            continue
        ok = run_sweep_step(ctx, step, say) if isinstance(step, Sweep) else run_command(ctx, step, say)
        if not ok:
            failed.append(step.name)
    if plan.report:
        report_folders(ctx, say)
    say(f"done in {time.monotonic() - ctx.t0:.0f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def run_sweep_step(ctx: Context, step: Sweep, say: Say) -> bool:
    if ctx.runner is None:
        raise ValueError("run_sweep_step needs a Context with a runner")
    if step.predict_s is not None:
        predict(ctx, step, say)
    _, stop = stop_after(ctx, step)  # after the prediction: its time is spent
    request = sweep_request(ctx, step, stop)
    log_command(ctx, shell_line(list(request.command or ())))
    start = time.time()
    rc = ctx.runner.sweep(request)
    record_wall(ctx, step.name, start, rc)
    if step.smoke and not all_cells_ok(ctx.out / step.name / "results.csv"):
        logs = sorted((ctx.out / step.name / "cells").glob("*/replica.*.log"))
        tail = [ln for f in logs for ln in f.read_text(errors="replace").splitlines() if ln.strip()][-20:]
        for line in tail:
            say(line)
        raise CampaignStopped(f"smoke step {step.name}: a cell failed; stopping before the long steps")
    if rc != 0:
        say(f"{step.name}: sharebench run exited {rc}")
    return rc == 0


def prediction_file(ctx: Context, step: Sweep) -> Path:
    return ctx.out / f"dry_{step.name}.txt"


def predict(ctx: Context, step: Sweep, say: Say) -> None:
    """The step's dry run (``sharebench run ... --dry-run``), before the step, its output kept in
    ``dry_<name>.txt``: what the run predicted, on record before anything of the step is measured. At most
    ``predict_s`` seconds (and what the plan's budget has left); its failure does not stop the step."""
    if ctx.runner is None or ctx.runner.predict is None or step.predict_s is None:
        return
    path = prediction_file(ctx, step)
    request = replace(sweep_request(ctx, step, None), dry_run=True)
    request = replace(request, command=(*(request.command or ()), "--dry-run"))
    log_command(ctx, shell_line(list(request.command or ())) + f" > {path}")
    left = ctx.left_s()
    rc = ctx.runner.predict(request, path, step.predict_s if left is None else max(min(step.predict_s, left), 1.0))
    said = [ln.strip() for ln in path.read_text(errors="replace").splitlines()] if path.is_file() else []
    for line in [ln for ln in said if ln.startswith(("predicted:", "cost:", "budget:"))][:3]:
        say(f"{step.name} dry run: {line}")
    if rc != 0:
        say(f"{step.name}: its dry run exited {rc} ({path})")


def record_wall(ctx: Context, name: str, start: float, status: int) -> None:
    """A step's row of ``walls.csv``: its start and end (Unix seconds) and exit status."""
    path = ctx.out / WALLS_CSV
    new = not path.is_file()
    with path.open("a", newline="") as fh:
        writer = csv.writer(fh)
        if new:
            writer.writerow(WALLS_COLUMNS)
        writer.writerow([name, f"{start:.3f}", f"{time.time():.3f}", status])


def all_cells_ok(results_csv: Path) -> bool:
    if not results_csv.is_file():
        return False
    with results_csv.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    return bool(rows) and all(r.get("cell_status") == "ok" for r in rows)


def run_command(ctx: Context, step: Command, say: Say) -> bool:
    if step.needs and shutil.which(step.needs) is None:
        say(f"skipped {step.name}: {step.needs} is not on PATH")
        return True
    argv = [ctx.fill(a) for a in step.run]
    target = Path(ctx.fill(step.stdout)) if step.stdout else None
    log_command(ctx, shell_line(argv) + (f" {'>>' if step.append else '>'} {target}" if target else ""))
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
    start = time.time()
    try:
        if target is None:
            rc = subprocess.run(argv, timeout=step.timeout_s, check=False).returncode
        else:
            with open(target, "a" if step.append else "w") as fh:
                rc = subprocess.run(argv, stdout=fh, timeout=step.timeout_s, check=False).returncode
    except subprocess.TimeoutExpired:
        rc = 124
    except OSError as exc:
        say(f"{step.name}: cannot run {argv[0]}: {exc.strerror}")
        rc = 127
    record_wall(ctx, step.name, start, rc)
    if rc != 0:
        say(f"{step.name}: exited {rc}" + (" (optional)" if step.optional else ""))
    return rc == 0 or step.optional


def log_command(ctx: Context, line: str) -> None:
    with open(ctx.out / "commands.txt", "a") as fh:
        fh.write(line + "\n")


def record_machine(ctx: Context) -> None:
    """UTC time, host and (on an NVIDIA machine) the GPU's identity, appended to ``machine.txt``."""
    lines = [dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), socket.gethostname()]
    if ctx.plan.device != "cpu" and shutil.which("nvidia-smi"):
        q = [f"--query-gpu={GPU_QUERY}", "--format=csv"]
        res = subprocess.run(["nvidia-smi", *q], capture_output=True, text=True, check=False)
        lines += res.stdout.strip().splitlines()
    with open(ctx.out / "machine.txt", "a") as fh:
        fh.write("\n".join(lines) + "\n")


def report_folders(ctx: Context, say: Say) -> None:
    """Rebuild the report of each sweep folder and name the GPU it ran on."""
    for step in ctx.plan.steps:
        folder = ctx.out / step.name
        if ctx.runner is None or not isinstance(step, Sweep) or not (folder / "results.csv").is_file():
            continue
        t0 = time.monotonic()
        ctx.runner.report(folder)
        ctx.report_s = max(ctx.report_s, time.monotonic() - t0)
        prov = folder / "provenance.json"
        device = (json.loads(prov.read_text()).get("device") or {}) if prov.is_file() else {}
        say(f"{folder} GPU UUID: {device.get('uuid')} {device.get('name')}")
