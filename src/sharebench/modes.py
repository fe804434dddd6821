"""Sharing modes: each kind declared once (:data:`KINDS`), every mode string parsed in one place.

A mode string is ``KIND`` or ``KIND:ARG``. Every kind is one :class:`KindSpec` row of :data:`KINDS`:
its grammar, where its replica count comes from, its family, the loss table its cells go to, the
device it needs, the helper a cell of it needs, the device plugin's name for it, whether it is local
only. Every layer routes on those traits (``mode.spec.family == "shared"``), never on the kind's
name; each layer that has behaviour of its own per kind (planners, node targets, predictors, the
Answer's isolation text) keeps a table keyed by :attr:`KindSpec.name`, and
``tests/vocabulary/test_kinds.py`` fails, naming the place, when a kind lacks one.

Adding a sharing mode: one row here (and its arguments' parser, if none fits), then the tables the
coverage test names (``docs/architecture.md``, "Add a sharing mode").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from sharebench.errors import UserError

INTERVALS = ("default", "short", "medium", "long")  # nvidia-smi compute-policy --set-timeslice 0..3

# replicas one cell may run at once (what one device can hold; partition:N is bounded by the cores)
MAX_REPLICAS = 64

Family = Literal["baseline", "shared", "instances", "partition"]
DeviceClass = Literal["any", "cuda", "cpu"]
ReplicasFrom = Literal["one", "count", "layout"]
MPS_DAEMON = "mps"  # KindSpec.helper: an MPS control daemon the cell's replicas are clients of


@dataclass(frozen=True)
class Mode:
    kind: str  # the name of one KINDS row
    replicas: int | None = 1  # None for a layout kind until the layout is resolved
    layout: str | None = None  # layout kinds only (mig, mig-emulated), as written by the user
    thread_pct: int | None = None  # mps only
    interval: str | None = None  # timeslice only: one of INTERVALS; None leaves the GPU's setting alone

    @property
    def spec(self) -> KindSpec:
        """This mode's kind, as declared in :data:`KINDS`."""
        return spec_of(self.kind)

    @property
    def label(self) -> str:
        how = self.spec.replicas_from
        if how == "one":
            return self.kind
        if how == "layout":
            return f"{self.kind}:{self.layout}"
        pct = f"@{self.thread_pct}" if self.thread_pct is not None else ""
        interval = f"/{self.interval}" if self.interval is not None else ""
        return f"{self.kind}:{self.replicas}{pct}{interval}"

    @property
    def is_baseline(self) -> bool:
        """One replica alone on the whole device: T_1, the baseline every loss is against."""
        return self.spec.family == "baseline"

    @property
    def sm_share(self) -> bool:
        """Each replica limited to a share of the SMs (``mps:N@PCT``): its cells scale like a partition."""
        return self.thread_pct is not None

    @property
    def table(self) -> str:
        """The loss table this mode's cells go to (:attr:`KindSpec.table`; a share of the SMs goes to
        the partition table)."""
        return "partition" if self.sm_share else self.spec.table

    def __str__(self) -> str:
        return self.label


ArgParser = Callable[["KindSpec", str, str], Mode]


def _no_arg(spec: KindSpec, text: str, arg: str) -> Mode:
    if arg:
        raise UserError(f"{spec.name!r} takes no count (got {text!r}); allowed: {ALLOWED}")
    return Mode(spec.name, 1)


def _count(arg: str, text: str, limit: bool) -> int:
    if not re.fullmatch(r"-?\d+", arg):
        raise UserError(f"bad replica count in {text!r}; allowed: an integer N >= 1")
    if len(arg) > 6 or (limit and int(arg) > MAX_REPLICAS):
        raise UserError(f"replica count too large in {text!r}; allowed: 1..{MAX_REPLICAS} replicas per cell")
    n = int(arg)
    if n < 1:
        raise UserError(f"replica count must be >= 1 in {text!r}")
    return n


def _counted(spec: KindSpec, text: str, arg: str) -> Mode:
    """``N``, ``N@PCT`` where the kind takes a thread share, ``N/INTERVAL`` where it takes an interval."""
    pct = interval = None
    if "/" in arg:
        if not spec.takes_interval:
            raise UserError(f"only timeslice takes a /INTERVAL (got {text!r}); allowed: {ALLOWED}")
        arg, _, interval = arg.partition("/")
        if interval not in INTERVALS:
            raise UserError(
                f"bad time-slice interval in {text!r}; allowed: {', '.join(INTERVALS)} (e.g. timeslice:2/long)"
            )
    if spec.takes_thread_pct and "@" in arg:
        arg, _, pct_s = arg.partition("@")
        if not pct_s.isdigit() or not 1 <= int(pct_s) <= 100:
            raise UserError(f"bad MPS thread percentage in {text!r}; allowed: an integer 1..100")
        pct = int(pct_s)
    n = _count(arg, text, limit=spec.device_class != "cpu")
    return Mode(spec.name, n, thread_pct=pct, interval=interval)


def _layout(pattern: str, examples: str, what: str) -> ArgParser:
    def parse(spec: KindSpec, text: str, arg: str) -> Mode:
        if not re.fullmatch(pattern, arg):
            raise UserError(f"bad {what} in {text!r}; allowed: {examples}")
        return Mode(spec.name, None, layout=arg)

    return parse


@dataclass(frozen=True)
class KindSpec:
    """One sharing-mode kind: what every layer needs to know of it, declared once.

    ``family``: ``baseline`` (one replica alone: T_1), ``shared`` (N replicas on one whole device),
    ``instances`` (one replica per instance of a layout), ``partition`` (N replicas on disjoint
    slices of the device). ``table``: the loss table its cells go to ('' none: the baseline).
    ``device_class``: what it runs on (``cuda``: an NVIDIA GPU through CUDA; ``cpu``; ``any``).
    ``replicas_from``: ``one``, ``count`` (the N in ``KIND:N``) or ``layout`` (the instances of
    ``KIND:LAYOUT``). ``helper``: what a cell of it needs around its replicas ('' none; ``mps``: an
    MPS control daemon the replicas are clients of). ``plugin_sharing``: the NVIDIA device plugin's
    sharing strategy for it ('' none). ``local_only``: a mode of one machine, with no node target.
    ``emulates``: the kind it stands in for (``mig-emulated``: MIG's compute shares through MPS), a
    measurement the Answer never chooses.
    """

    name: str
    grammar: str  # as the help and the reference show it
    summary: str  # one line: what it is
    order: float  # the order tables and plots list kinds in
    family: Family
    table: str
    device_class: DeviceClass
    replicas_from: ReplicasFrom
    parse_arg: ArgParser = field(repr=False, compare=False)
    helper: str = ""
    plugin_sharing: str = ""
    local_only: bool = False
    takes_thread_pct: bool = False
    takes_interval: bool = False
    emulates: str = ""  # the kind this one is a stand-in for ('' none): measured, never a mode to choose
    # the argument a capacity search at N users gives the kind ('' not searched): "{n}" (N replicas), "{n}x"
    # (a layout of N equal instances, the largest profile the device holds N times: gpus.emulated_layout)
    search_arg: str = ""

    @property
    def shared(self) -> bool:
        """N replicas on one whole device at once, whose loss is T_N against N·T_1."""
        return self.family == "shared"

    @property
    def device_instances(self) -> bool:
        """One replica per instance the device itself is split into and a node advertises (MIG): on a
        cluster, one pod, one resource and one claim per instance. A local-only kind's instances are
        the cell's own."""
        return self.family == "instances" and not self.local_only


KINDS: dict[str, KindSpec] = {
    s.name: s
    for s in (
        KindSpec(
            "exclusive", "exclusive", "one replica alone on the device (T_1)", 0, "baseline", "", "any", "one", _no_arg
        ),
        KindSpec(
            "timeslice",
            "timeslice:N[/INTERVAL]",
            "N concurrent processes taking turns on the device; INTERVAL (default, short, medium, long) is "
            "the time-slice length the GPU is set to for the cell",
            1,
            "shared",
            "timeslice",
            "any",
            "count",
            _counted,
            plugin_sharing="time-slicing",
            takes_interval=True,
            search_arg="{n}",
        ),
        KindSpec(
            "mps",
            "mps:N[@PCT]",
            "N MPS clients of one control daemon, optional active-thread percentage each",
            2,
            "shared",
            "mps",
            "cuda",
            "count",
            _counted,
            helper=MPS_DAEMON,
            plugin_sharing="mps",
            takes_thread_pct=True,
            search_arg="{n}",
        ),
        KindSpec(
            "mig",
            "mig:LAYOUT",
            "one replica per MIG instance (LAYOUT: 7g, 1g, 1g.18gb, all-1g.5gb)",
            3,
            "instances",
            "mig",
            "cuda",
            "layout",
            _layout(r"(all-)?(\d+g(\.\d+gb)?|disabled)", "mig:7g, mig:1g, mig:1g.18gb, mig:all-1g.5gb", "MIG layout"),
        ),
        KindSpec(
            "mig-emulated",
            "mig-emulated:LAYOUT",
            "MIG emulated with MPS: one client per instance of the layout, each with its profile's SM share "
            "and memory limit (LAYOUT: 1g.18gb, 7x1g.18gb, 4g.71gb+3g.71gb, all-1g.18gb, 7g); no MIG "
            "memory/L2/fault isolation",
            3.5,
            "instances",
            "mig_emulated",
            "cuda",
            "layout",
            _layout(
                r"[0-9a-z.+]+(-[0-9a-z.+]+)?",
                "mig-emulated:1g.18gb, mig-emulated:7x1g.18gb, mig-emulated:4g.71gb+3g.71gb, mig-emulated:all-1g.18gb",
                "emulated MIG layout",
            ),
            helper=MPS_DAEMON,
            local_only=True,
            emulates="mig",
            search_arg="{n}x",
        ),
        KindSpec(
            "partition",
            "partition:N",
            "CPU only: N replicas on disjoint core sets",
            4,
            "partition",
            "partition",
            "cpu",
            "count",
            _counted,
            local_only=True,
        ),
    )
}

ALLOWED = ", ".join(s.grammar for s in KINDS.values())
# the modes a local sweep runs when none are given (the CLI's --modes, `make run`)
DEFAULT_MODES = ("exclusive", "timeslice:2", "timeslice:4", "mps:2")
BASELINE = next(s.name for s in KINDS.values() if s.family == "baseline")  # "exclusive"


def spec_of(kind: str) -> KindSpec:
    """The :class:`KindSpec` of ``kind`` (a one-line UserError for a kind no row declares)."""
    try:
        return KINDS[kind]
    except KeyError:
        raise UserError(f"unknown sharing mode kind {kind!r}; allowed: {', '.join(KINDS)}") from None


def kind_of(mode: str | Mode) -> str:
    """The kind of a mode or of a mode label as the results store it (``"mps:4@25"`` -> ``"mps"``)."""
    return mode.kind if isinstance(mode, Mode) else str(mode).strip().lower().partition(":")[0]


def is_baseline(mode: str | Mode) -> bool:
    """Whether a mode (or its label) is the baseline kind: one replica alone on the device."""
    spec = KINDS.get(kind_of(mode))
    return spec is not None and spec.family == "baseline"


def time_sliced(mode: str | Mode) -> bool:
    """Whether a mode's (or label's, or kind's) replicas take turns by the GPU's time slices: the kind
    that takes an interval (the time-slice probe and the split of a loss are for its cells)."""
    spec = KINDS.get(kind_of(mode))
    return spec is not None and spec.takes_interval


def kinds_where(**traits: object) -> tuple[str, ...]:
    """The kinds whose specs have every trait given (``kinds_where(family="shared")``)."""
    return tuple(s.name for s in KINDS.values() if all(getattr(s, k) == v for k, v in traits.items()))


def parse_mode(text: str) -> Mode:
    s = text.strip().lower()
    kind, sep, arg = s.partition(":")
    spec = KINDS.get(kind)
    if spec is None or (spec.replicas_from != "one" and (not sep or not arg)):
        raise UserError(f"unknown sharing mode {text!r}; allowed: {ALLOWED}")
    if spec.replicas_from == "one" and sep:
        raise UserError(f"{kind!r} takes no count (got {text!r}); allowed: {ALLOWED}")
    return spec.parse_arg(spec, text, arg)


def parse_modes(text: str | list[str] | tuple[str, ...]) -> list[Mode]:
    items = text.split(",") if isinstance(text, str) else list(text)
    modes = [parse_mode(t) for t in items if t.strip()]
    if not modes:
        raise UserError("no sharing mode given; allowed: " + ALLOWED)
    return modes


def as_modes(modes: str | Iterable[str | Mode]) -> tuple[Mode, ...]:
    """Mode strings (a list, or ``a,b``) parsed, each once; a :class:`Mode` is kept as it is; duplicates
    dropped (the first kept). A one-line UserError names a bad mode, or an empty list."""
    items = modes.split(",") if isinstance(modes, str) else list(modes)
    parsed = [m if isinstance(m, Mode) else parse_mode(m) for m in items if isinstance(m, Mode) or m.strip()]
    if not parsed:
        raise UserError(f"no sharing mode given; allowed: {ALLOWED}")
    return tuple({m.label: m for m in parsed}.values())


def with_baseline(modes: list[Mode]) -> list[Mode]:
    """``modes`` with the baseline first, unless given (every loss needs T_1)."""
    return modes if any(m.is_baseline for m in modes) else [Mode(BASELINE, 1), *modes]


def mode_sort_key(mode: str | Mode) -> tuple:
    """The order tables and plots list modes in: by kind (:attr:`KindSpec.order`), each by replica
    count (``timeslice:2`` before ``timeslice:8``), then by time-slice interval (none given, then
    default, short, medium, long). A kind no row declares sorts last."""
    kind, _, arg = str(mode).partition(":")
    spec = KINDS.get(kind)
    order = spec.order if spec is not None else 9
    num, _, interval = arg.split("@")[0].partition("/")
    rank = INTERVALS.index(interval) + 1 if interval in INTERVALS else 0
    return (order, int(num) if num.isdigit() else 0, rank, arg)


def grammar_list(*, cluster: bool = False, bare: bool = False) -> str:
    """The kinds' grammars, comma-separated, in KINDS order: ``cluster`` only those a node takes (not
    local-only); ``bare`` without their optional parts (``timeslice:N``, not ``timeslice:N[/INTERVAL]``)."""
    specs = [s for s in KINDS.values() if not (cluster and s.local_only)]
    return ", ".join(s.grammar.split("[")[0] if bare else s.grammar for s in specs)


def help_text() -> str:
    """The modes' grammar, one line per kind, for ``--help`` and the generated reference."""
    return "\n".join(f"{s.grammar:22s} {s.summary}" for s in KINDS.values())


# ----------------------------------------------------------------- capacity by search (sharebench.sweep.capacity)
# a family is a searchable kind without N (timeslice, mps, timeslice/long, mps@25, mig-emulated): --capacity
# searches its N; the kind's ``search_arg`` says what N becomes (N replicas, or a layout of N equal instances)
DEFAULT_USERS = (2, 64)  # --users LO..HI: HI is the stated maximum
# the kind's own limit on N: MPS at most 48 clients per control daemon (Volta and later); MIG at most 7 instances
KIND_MAX = {"mps": 48, "mig-emulated": 7}


def family_max(family: str, hi: int = MAX_REPLICAS) -> int:
    """The largest N a search of ``family`` may try: ``hi`` (``--users LO..HI``), at most its kind's limit."""
    return min(hi, KIND_MAX.get(family_kind(family), MAX_REPLICAS), MAX_REPLICAS)


def family_kind(family: str) -> str:
    return family.split("/")[0].split("@")[0]


def family_mode(family: str, n: int) -> Mode:
    """``timeslice/long`` at 4 -> ``timeslice:4/long``; ``mps@25`` at 4 -> ``mps:4@25``; ``mig-emulated`` at 4
    -> ``mig-emulated:4x`` (4 equal instances, resolved on the device's model)."""
    kind, _, interval = family.partition("/")
    kind, _, pct = kind.partition("@")
    arg = spec_of(kind).search_arg.format(n=n)
    return parse_mode(f"{kind}:{arg}" + (f"@{pct}" if pct else "") + (f"/{interval}" if interval else ""))


def parse_family(text: str) -> str | None:
    """A mode string that names a family without N (``timeslice``, ``mps``, ``timeslice/long``, ``mps@25``,
    ``mig-emulated``): its family; None for anything else (a mode with N, exclusive, a kind not searched)."""
    s = text.strip().lower()
    base = s.split("/")[0].split("@")[0]
    spec = KINDS.get(base)
    if spec is None or ":" in s or not spec.search_arg:
        return None
    family_mode(s, 2)  # a bad interval or percentage: the mode parser's one-line error
    return s


def families_of(items: Iterable[str]) -> tuple[list[str], list[str]]:
    """``--modes`` items split into capacity families (no N) and modes (the rest, as written)."""
    fams: list[str] = []
    modes: list[str] = []
    for t in items:
        if not t.strip():
            continue
        fam = parse_family(t)
        (fams if fam is not None else modes).append(fam if fam is not None else t)
    return list(dict.fromkeys(fams)), modes


def parse_users(text: str | None) -> tuple[int, int]:
    """``--users LO..HI`` (or ``HI``): 2 <= LO <= HI <= 64; one-line error otherwise."""
    if text is None or not str(text).strip():
        return DEFAULT_USERS
    s = str(text).strip()
    lo_s, sep, hi_s = s.partition("..")
    try:
        lo, hi = (int(lo_s), int(hi_s)) if sep else (DEFAULT_USERS[0], int(lo_s))
    except ValueError:
        lo, hi = 0, 0
    if not 1 <= lo <= hi <= MAX_REPLICAS:
        raise UserError(f"bad --users {text!r}; allowed: LO..HI with 1 <= LO <= HI <= {MAX_REPLICAS} (e.g. 2..32)")
    return max(lo, 2) if hi >= 2 else lo, hi
