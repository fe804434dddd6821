"""Resuming a results folder: the folder's own sweep, continued exactly.

A cell's work is its whole identity: mode, particle count and repeat (its id) and what every cell
of the sweep shares: turns, engine, lattice content, seed, the run options and the device model.
:func:`work_key` hashes it into the ``work_key`` column. ``--resume`` takes every option the user
did not give from the folder's last sweep in ``sweep.json`` (:func:`inherit_options`; a folder of the
releases before the Workload value kept its fields loose, :func:`folder_workload` reads both), and
:func:`check_same_work` refuses, in one line naming the difference, a run whose shared identity
differs from the folder's for the same workload: its cells would be kept beside cells measured
under other settings (another workload is measured beside, in its own cells).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from sharebench.errors import UserError
from sharebench.results import read_sweeps
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
IDENTITY = ("turns", "engine", "lattice_sha256", "seed", "run_options")
OPTION_NAMES = {
    "turns": "--turns",
    "engine": "--engine",
    "lattice_sha256": "--lattice (its content)",
    "seed": "seed",
    "run_options": "run options",
}
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
    return json.loads(
        json.dumps(
            {
                "workload": workload or w.label,
                "turns": turns,
                "engine": w.engine,
                "lattice_sha256": lattice_digest(w.lattice),
                "seed": w.seed,
                "run_options": {**w.run_options(), **dict(config.run_options)},
            },
            default=str,
        )
    )


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


def inherit_options(out: Path, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` (SweepConfig fields, None where the user gave nothing; ``workload``: a dict of the
    Workload keys the user gave, None where not) with the folder's own values filled in where the user
    gave none. The exec fields (command, timing, name) come as a group, when the run's engine is exec
    and no command was given."""
    last = _last_sweep(out) if out.is_dir() else None
    if last is None:
        return given
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
    same_exec = str(workload.get("engine")).lower() == "exec" == str(before_workload.get("engine")).lower()
    if same_exec and workload.get("command") is None:
        workload.update({k: before_workload[k] for k in EXEC_KEYS if before_workload.get(k) is not None})
    filled["workload"] = workload
    return filled


def check_same_work(out: Path, shared: dict[str, Any], workload: str) -> None:
    """Refuse to resume ``out`` with a shared identity other than that of the folder's last sweep of
    the same workload. Another workload (engine, or exec program) is measured beside, in its own
    cells (the runner keeps cells per workload), so that the folder compares workloads."""
    if not out.is_dir():
        return
    same = [
        s
        for s in read_sweeps(out)
        if "identity" in s and s["identity"].get("workload", s["identity"].get("engine")) == workload
    ]
    if not same:
        return  # a new workload, or a folder of the first releases (its device check is all there is)
    before = same[-1]["identity"]
    for key in IDENTITY:
        if key in before and before[key] != shared.get(key):
            raise UserError(
                f"--resume: {out} was measured with {OPTION_NAMES[key]} {before[key]!r}, this run has "
                f"{shared.get(key)!r}; resume without changing it, or give another --out"
            )
