"""Resuming a results folder: the folder's own sweep, continued exactly.

A cell's work is its whole identity: mode, particle count and repeat (its id) and what every cell
of the sweep shares: turns, engine, lattice content, seed, the run options and the device model.
:func:`work_key` hashes it into the ``work_key`` column. ``--resume`` takes every option the user
did not give from the folder's last sweep in ``sweep.json`` (:func:`inherit_options`; a folder of the
releases before the Workload value kept its fields loose, :func:`folder_workload` reads both), and
:func:`check_same_work` refuses, in one line naming the difference, a run whose shared identity
differs from the folder's for the same workload: its cells would be kept beside cells measured
under other settings (another workload is measured beside, in its own cells).

A folder is data, never code: an exec sweep is resumed only with ``--exec`` given, the same command
as the folder's (:func:`check_exec_command`); the folder's command is never run. The rows themselves
are checked too (:func:`check_rows`: their turns and their ``work_key``, which hashes the lattice
content, seed, run options, program and pattern), and a folder whose ``sweep.json`` is gone is resumed
only from what its rows prove (:func:`options_from_rows`), or refused with the reason.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from sharebench.errors import UserError
from sharebench.results import RESULTS_CSV, load_results, read_sweeps
from sharebench.sweep.plan import SweepPlan
from sharebench.workloads.protocol import workload_name
from sharebench.workloads.workload import EXEC_KEYS, KEYS

# options a resumed run takes from the folder when the user does not give them
INHERITED = (
    "modes",
    "particles",
    "turns",
    "repeats",
    "warmup_repeats",
    "run_options",
    "ready_timeout_s",
    "run_timeout_s",
)
# what every cell of a sweep shares: a resumed run must match the folder on each
IDENTITY = ("turns", "engine", "lattice_sha256", "seed", "run_options", "pattern")
OPTION_NAMES = {
    "turns": "--turns",
    "engine": "--engine",
    "lattice_sha256": "--lattice (its content)",
    "seed": "seed",
    "run_options": "run options",
    "pattern": "pattern",
}
TRACKERS = ("simpletrack", "xtrack")
# a row's backend -> the device spec that finds it again (opencl: which platform is not in the row)
BACKEND_DEVICE = {"cpu": "cpu", "cuda": "cuda"}
# a workload's fields a resumed run takes from the folder one by one (the exec ones go together)
INHERITED_WORKLOAD = tuple(k for k in KEYS if k not in EXEC_KEYS)
# sweep.json of the releases before the Workload value: its exec fields sat in run_options
LEGACY_EXEC = {"exec_command": "command", "exec_timing": "timing", "exec_name": "name"}


def lattice_digest(lattice: str | None) -> str:
    """The lattice's content hash ("generated" for the generated ring)."""
    if lattice is None or str(lattice) in ("", "generated", "lhc-like"):
        return "generated"
    try:
        return hashlib.sha256(Path(lattice).read_bytes()).hexdigest()
    except OSError as exc:
        raise UserError(f"cannot read lattice file {lattice}: {exc.strerror or exc}") from None


def identity(config: Any, turns: int, workload: str | None = None) -> dict[str, Any]:
    """The shared identity of a sweep's cells (JSON-normalised, so that it compares with sweep.json).
    Its shape predates the Workload value: the exec fields count among the run options, as before."""
    w = config.workload
    shared = {
        "workload": workload or w.label,
        "turns": turns,
        "engine": w.engine,
        "lattice_sha256": lattice_digest(w.lattice),
        "seed": w.seed,
        "run_options": {**w.run_options(), **dict(config.run_options)},
    }
    if w.patterned:  # a batch sweep's identity (so its work_key) keeps the shape it had before patterns
        shared["pattern"] = f"{w.pattern}; neighbours {w.neighbour_pattern}; {w.bursts} bursts"
    return json.loads(json.dumps(shared, default=str))


def work_key(shared: dict[str, Any], cell_id: str, device_model: str) -> str:
    """A cell's whole work identity, hashed (16 hex digits)."""
    text = json.dumps({**shared, "cell": cell_id, "device": device_model}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _last_sweep(out: Path) -> dict[str, Any] | None:
    sweeps = read_sweeps(out)  # a torn or foreign sweep.json is a one-line error naming it
    return sweeps[-1] if sweeps else None


def folder_workload(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(workload dict, other run options) of a ``sweep.json`` config: its ``workload``, or, in a folder
    of the releases before it, its loose ``device, engine, lattice, seed`` and the exec fields of its
    ``run_options``."""
    options = dict(config.get("run_options") or {})
    if isinstance(config.get("workload"), dict):
        return dict(config["workload"]), options
    workload = {k: config[k] for k in ("device", "engine", "lattice", "seed") if config.get(k) is not None}
    for old, new in LEGACY_EXEC.items():
        if old in options:
            workload[new] = options.pop(old)
    return workload, options


def folder_rows(out: Path) -> Any:
    """The folder's rows (``load_results``: one-line UserError for an unreadable file), None without any."""
    path = out / RESULTS_CSV
    if not path.is_file() or path.stat().st_size == 0:
        return None
    return load_results(path)


def measured_cells(out: Path, workload: str, backend: str) -> set[str]:
    """The ids of the cells of ``workload`` that ``out`` holds measured (every row ok) on ``backend``."""
    rows = folder_rows(out)
    if rows is None:
        return set()
    ok = (rows["cell_status"] == "ok") & (rows["engine"] == workload) & (rows["backend"] == backend)
    return set(rows.loc[ok, "cell_id"])


def inherit_options(out: Path, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` (SweepConfig fields, None where the user gave nothing; ``workload``: a dict of the
    Workload keys the user gave, None where not) with the folder's own values filled in where the user
    gave none: from its last sweep in ``sweep.json``, or, where that is gone, from what its rows prove
    (:func:`options_from_rows`). The exec program is never taken from the folder: an exec sweep needs
    ``--exec``, the folder's own command (:func:`check_exec_command`); its name comes with it."""
    last = _last_sweep(out) if out.is_dir() else None
    if last is None:
        rows = folder_rows(out) if out.is_dir() else None
        filled = given if rows is None else options_from_rows(out, rows, given)
        check_exec_command(out, [], filled.get("workload") or {})
        return filled
    before_workload, before_options = folder_workload(last.get("config") or {})
    before = {**(last.get("config") or {}), "run_options": before_options}
    filled = dict(given)
    for key in INHERITED:
        if filled.get(key) is None and before.get(key) is not None:
            filled[key] = before[key]
    workload = dict(given.get("workload") or {})
    for key in INHERITED_WORKLOAD:
        if workload.get(key) is None and before_workload.get(key) is not None:
            workload[key] = before_workload[key]
    ran = [w for w in map(sweep_workload, read_sweeps(out)) if str(w.get("engine")).lower() == "exec"]
    check_exec_command(out, [w.get("command") for w in ran], workload)
    same = [w for w in ran if same_command(w.get("command"), workload.get("command"))]
    if same and workload.get("name") is None and same[-1].get("name"):
        workload["name"] = same[-1]["name"]  # a label, never code: it keeps the rows' workload name
    filled["workload"] = workload
    return filled


def sweep_workload(sweep: dict[str, Any]) -> dict[str, Any]:
    """The workload dict of one ``sweep.json`` entry."""
    return folder_workload(sweep.get("config") or {})[0]


def same_command(a: Any, b: Any) -> bool:
    """Two exec commands are the same program and arguments (spacing aside)."""
    return isinstance(a, str) and isinstance(b, str) and a.split() == b.split()


def check_exec_command(out: Path, ran: list[Any], workload: dict[str, Any]) -> None:
    """A resumed exec sweep runs only the command the user gave (--exec), and only the folder's own."""
    if str(workload.get("engine")).lower() != "exec":
        return
    commands = list(dict.fromkeys(c for c in ran if isinstance(c, str) and c))
    shown = " or ".join(repr(c) for c in commands) or "(not recorded: its sweep.json is gone)"
    command = workload.get("command")
    if command is None:
        raise UserError(
            f"--resume of the exec sweep in {out} needs --exec: a results folder never names the program "
            f"to run (the folder ran --exec {shown}); give --engine exec --exec with that command"
        )
    if commands and not any(same_command(c, command) for c in commands):
        raise UserError(
            f"--resume: {out} ran --exec {shown}, this run gives --exec {command!r}; resume with the folder's "
            "command, or measure another program in another --out"
        )


def options_from_rows(out: Path, rows: Any, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` filled from what the rows of a folder without ``sweep.json`` prove: the workload, modes,
    sizes, turns and repeats; the device where the backend names it. A value the rows cannot prove (the
    lattice's path, the program) must be given; UserError naming it otherwise."""
    why = f"{out}/sweep.json is gone; --resume continues from what results.csv's rows prove"
    workload = dict(given.get("workload") or {})
    labels = list(dict.fromkeys(str(e) for e in rows["engine"]))
    engine = workload.get("engine")
    if engine is None:
        if len(labels) != 1:
            raise UserError(f"{why}, and they hold the workloads {', '.join(labels)}: give --engine (and --exec)")
        engine = labels[0] if labels[0] in TRACKERS else "exec"
        workload["engine"] = engine
    if str(engine).lower() in TRACKERS:
        label = str(engine).lower()
    elif workload.get("command") is None:
        return {**given, "workload": workload}  # check_exec_command refuses it, naming --exec
    else:
        label = workload.get("name") or workload_name(workload["command"])
    mine = rows[rows["engine"] == label]
    if mine.empty:
        return {**given, "workload": workload}  # another workload, measured beside: nothing to continue
    if (mine["work_key"].astype(str) == "").any():
        raise UserError(
            f"{why}, and its rows carry no work_key: the seed and options they were measured with cannot be "
            "proved; give another --out"
        )
    lattices = set(mine["lattice"].astype(str)) - {"", "generated"}
    if lattices and workload.get("lattice") is None and str(engine).lower() in TRACKERS:
        raise UserError(f"{why}; they were measured on lattice {', '.join(sorted(lattices))}: give --lattice PATH")
    backends = set(mine["backend"].astype(str))
    if workload.get("device") is None and len(backends) == 1 and backends <= set(BACKEND_DEVICE):
        workload["device"] = BACKEND_DEVICE[backends.pop()]
    turns = sorted({int(t) for t in mine["turns"] if t == t})
    proved: dict[str, Any] = {
        "modes": list(dict.fromkeys(str(m) for m in mine["mode"])),
        "particles": sorted({int(p) for p in mine["particles"] if p == p}),
        "turns": turns[0] if len(turns) == 1 and str(engine).lower() in TRACKERS else None,
        "repeats": int(mine["repeat"].max()),
        "warmup_repeats": max(0, 1 - int(mine["repeat"].min())),
    }
    filled = dict(given)
    for key, value in proved.items():
        if filled.get(key) is None and value not in (None, []):
            filled[key] = value
    filled["workload"] = workload
    return filled


def check_same_work(out: Path, shared: dict[str, Any], workload: str, device_model: str | None = None) -> None:
    """Refuse to resume ``out`` with a shared identity other than that of the folder's last sweep of
    the same workload, or than its rows' (:func:`check_rows`, with ``device_model``: the model the
    run's ``work_key`` names). Another workload (engine, or exec program) is measured beside, in its own
    cells (the runner keeps cells per workload), so that the folder compares workloads."""
    if not out.is_dir():
        return
    same = [
        s
        for s in read_sweeps(out)
        if "identity" in s and s["identity"].get("workload", s["identity"].get("engine")) == workload
    ]
    before = same[-1]["identity"] if same else {}  # none: a new workload, or a folder of the first releases
    for key in IDENTITY:
        if before and (key in before or key in shared) and before.get(key) != shared.get(key):
            raise UserError(
                f"--resume: {out} was measured with {OPTION_NAMES[key]} {before.get(key, 'batch')!r}, this run has "
                f"{shared.get(key, 'batch')!r}; resume without changing it, or give another --out"
            )
    rows = folder_rows(out)
    if rows is not None:
        check_rows(out, rows, shared, workload, device_model)


def check_rows(out: Path, rows: Any, shared: dict[str, Any], workload: str, device_model: str | None) -> None:
    """The rows of ``workload`` in ``out`` were measured with this run's turns and, where they carry a
    ``work_key`` and ran on ``device_model``, with its whole identity; UserError naming the difference."""
    mine = rows[rows["engine"] == workload]
    # a patterned row's turns are the turns it ran (its bursts' units); its work_key carries the --turns
    patterned = mine["pattern"].fillna("").astype(str) != "" if "pattern" in mine else False
    turns = sorted({int(t) for t in mine.loc[~patterned, "turns"] if t == t} - {int(shared["turns"])})
    if turns:
        raise UserError(
            f"--resume: the rows of {workload} in {out} were measured with --turns {turns[0]}, this run has "
            f"{shared['turns']}; resume without changing it, or give another --out"
        )
    if not device_model:
        return
    keyed = mine[(mine["work_key"].astype(str) != "") & (mine["device_name"].astype(str).isin(["", device_model]))]
    for r in keyed[["cell_id", "work_key"]].drop_duplicates().itertuples():
        expected = work_key(shared, str(r.cell_id), device_model)
        if r.work_key != expected:
            raise UserError(
                f"--resume: the rows of cell {r.cell_id} in {out} were measured with other work (work_key "
                f"{r.work_key}, this run's {expected}: another lattice content, seed, run option, program or "
                "pattern); resume with the folder's own options, or give another --out"
            )


def resumed_cells(out: Path, plan: SweepPlan, notes: list[str]) -> set[str]:
    """Cells already measured (ok) in ``out`` by ``plan``'s workload; refuses to mix another device model or
    class into the folder (a note when it is another physical device of the same model)."""
    if not (out / RESULTS_CSV).exists():
        return set()
    df = load_results(out)
    dev = plan.device

    def model(name: Any) -> str:  # "NVIDIA H200 MIG 1g.18gb" is an H200
        return re.sub(r"\s+MIG\s.*$", "", str(name or "")).strip()

    for r in df[["device_class", "backend", "device_name"]].drop_duplicates().itertuples():
        if (r.device_class, r.backend) != (dev.kind, dev.backend) or (
            model(r.device_name) and model(dev.name) and model(r.device_name) != model(dev.name)
        ):
            raise UserError(
                f"{out} holds results measured on {r.device_name or '?'} ({r.backend}, {r.device_class}); "
                f"this run's device is {dev.name} ({dev.backend}, {dev.kind}): "
                "use another --out (and compare the two with sharebench compare A B)"
            )
    uuids = sorted({u for u in df["parent_uuid"] if isinstance(u, str) and u})
    if dev.uuid and uuids and dev.uuid not in uuids and dev.kind == "gpu":
        notes.append(f"resumed on another physical device of the same model ({dev.uuid}; before: {', '.join(uuids)})")
    # another workload resumed into the folder has its own cells under the same ids
    return set(df.loc[(df["cell_status"] == "ok") & (df["engine"] == plan.workload), "cell_id"])
