"""What sharebench writes, and in which version: the results CSV's columns and every JSON document.

One convention for every file (as asv and pyperf keep one): a results CSV carries its version in
the ``schema_version`` column of every row; a JSON document carries ``"kind"`` and
``"schema_version"`` as its first two keys. :data:`DOCUMENTS` lists each kind and the version this
sharebench writes; ``sharebench.results.store`` reads older versions (and the first release's
spellings) and refuses newer ones with a message saying what to do.

History of the JSON documents:

* ``provenance`` 2: absorbs the former ``machine.json`` (host load and usable cores, every NVIDIA GPU
  NVML lists, the CUDA runtime); version 1 spelled its version ``"schema": "sharebench.provenance/1"``.
* ``sweep`` 1 (``sweep.json``: the sweeps that wrote into a results folder); the first release wrote
  it without a version.
* ``record`` 1 (a replica's record, ``cells/<cell>/record.<i>.json``); the first release spelled its
  version ``"record_version"``.
* ``bench`` 1 (``bench.json`` of ``sharebench bench``).
* ``rows`` 1: results rows (``{"rows": [...]}``, each in the CSV's schema) handed from one KFP task to
  the next.
* ``timeslice_split`` 1 (``timeslice_split.json``: the raw records of the runs beside the time-slice
  probe, ``sharebench.analysis.timeslice_split``).
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 1  # results.csv
DOCUMENTS: dict[str, int] = {"provenance": 2, "sweep": 1, "record": 1, "bench": 1, "rows": 1, "timeslice_split": 1}


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # "str", "int", "float", "bool"
    unit: str  # "" when dimensionless or text
    doc: str


# Every column, in file order. Extra columns are only allowed with the prefix
# ``tel_`` (telemetry summaries, see sharebench.telemetry).
COLUMNS: tuple[Column, ...] = (
    Column("schema_version", "int", "", "version of this schema (1); a loader refuses other versions"),
    Column("sweep_id", "str", "", "identifier of the sweep that wrote the row (UTC start time)"),
    Column("cell_id", "str", "", "one cell = one mode x particle count x repeat, e.g. `timeslice:2_p10000_r1`"),
    Column(
        "work_key",
        "str",
        "",
        "hash of the cell's whole work identity: cell id, turns, engine, lattice "
        "content, seed, run options, device model (sharebench.sweep.resume)",
    ),
    Column(
        "mode",
        "str",
        "",
        "sharing mode, lowercase: exclusive, timeslice:N[/INTERVAL], mps:N[@PCT], "
        "mig:LAYOUT, mig-emulated:LAYOUT, partition:N",
    ),
    Column("mode_kind", "str", "", "exclusive, timeslice, mps, mig, mig-emulated or partition"),
    Column("replicas", "int", "", "N: replicas that ran concurrently in the cell"),
    Column("replica", "int", "", "index of this replica in the cell, 0..N-1"),
    Column("repeat", "int", "", "repeat index; 0 is the discarded warm-up, 1..R are measured"),
    Column("warmup", "bool", "", "true for warm-up rows (kept on disk, left out of every statistic)"),
    Column("device_class", "str", "", "gpu or cpu: the class of device the replicas shared"),
    Column("backend", "str", "", "cuda, opencl or cpu"),
    Column("device_spec", "str", "", "device as requested, e.g. cuda:0, opencl:0.0, cpu"),
    Column("engine", "str", "", "workload: simpletrack, xtrack, or the exec engine's workload name"),
    Column("context", "str", "", "Xsuite/compute context the replica used"),
    Column("device_name", "str", "", "device name as the replica saw it"),
    Column("device_uuid", "str", "", "device UUID the replica ran on (MIG UUID under MIG; a host id on the CPU)"),
    Column("parent_uuid", "str", "", "physical GPU UUID (the MIG instance's parent; equals device_uuid otherwise)"),
    Column("mig_profile", "str", "", "MIG profile of the instance (e.g. 1g.18gb); empty when not MIG"),
    Column("sms", "int", "SMs", "streaming multiprocessors available to the replica (GPU, when known)"),
    Column("cores", "int", "cores", "CPU cores the replica could run on (CPU device)"),
    Column("cpus", "str", "", "core set the replica was pinned to (partition), e.g. 0-3; empty: all"),
    Column("thread_pct", "int", "%", "MPS active-thread percentage per client; empty: not set"),
    Column("lattice", "str", "", "lattice file name, or `generated` for the built-in LHC-like ring"),
    Column("particles", "int", "particles", "particles tracked by this replica (exec engine: SHAREBENCH_WORK)"),
    Column("turns", "int", "turns", "turns tracked"),
    Column("elements", "int", "elements", "elements in the line"),
    Column("setup_s", "float", "s", "build + compile + particle generation time"),
    Column("transfer_s", "float", "s", "host-device transfer time"),
    Column("track_s", "float", "s", "tracking time alone (the timed window, synchronised)"),
    Column("track_start", "float", "s (Unix epoch)", "wall-clock start of the tracking window"),
    Column("track_end", "float", "s (Unix epoch)", "wall-clock end of the tracking window"),
    Column("particle_turns_per_s", "float", "particle-turns/s", "particles x turns / track_s"),
    Column("element_passes_per_s", "float", "element-passes/s", "particles x turns x elements / track_s"),
    Column("survived", "int", "particles", "particles alive at the end"),
    Column("checksum", "str", "", "checksum of the final coordinates"),
    Column("host", "str", "", "host name"),
    Column("pid", "int", "", "process id of the replica"),
    Column("status", "str", "", "ok or failed (this replica)"),
    Column("error", "str", "", "one-line error of a failed replica; empty when ok"),
    Column("cell_status", "str", "", "ok or failed (any replica of the cell failed, or they ran on different devices)"),
    Column("cell_error", "str", "", "why the cell failed; empty when ok"),
    Column(
        "exec_timing",
        "str",
        "",
        "exec engine: `protocol` (the program's own timed window) or `process` "
        "(the whole process from the barrier instant); empty for the trackers",
    ),
    Column(
        "warm_cells",
        "int",
        "cells",
        "cells the replica's process ran before this one: 0 a fresh process, "
        "more a warm replica kept from earlier cells (sharebench.sharing.pool)",
    ),
)
# Optional columns: in the header only of a file where some row carries them (after the columns above and
# in this order), read as their empty value from a file without them. Batch sweeps (the default) never
# write them, so their results.csv keeps the columns above.
OPTIONAL_COLUMNS: tuple[Column, ...] = (
    Column(
        "pattern",
        "str",
        "",
        "the replica pattern this replica followed (sharebench.patterns label, e.g. "
        "`interactive:burst=10,think=0.5`; its bursts in bursts.csv); empty: batch, the saturated replica",
    ),
    # a patterned cell's verdict as the sweep decided it while the cell ran (issue 42, sharebench.sweep.watch),
    # over every burst the cell kept; the same on each replica's row; empty where the cell was not watched
    Column("verdict", "str", "", "the cell's verdict: within, above or undecided (every user of the pattern counted)"),
    Column("users", "int", "", "users counted: the replicas of the victim's pattern (1: the alone cell)"),
    Column("samples", "int", "bursts", "the fewest bursts of any user"),
    Column("worst_replica", "str", "", "the user with the largest p95 slowdown"),
    Column("worst_p95_slowdown", "float", "x", "that user's p95 over the alone p95"),
    Column("worst_p95_slowdown_lo", "float", "x", "the largest lower bound of a user's p95 slowdown"),
    Column("worst_p95_slowdown_hi", "float", "x", "the largest upper bound of a user's p95 slowdown"),
    Column("pooled_p95_slowdown", "float", "x", "the p95 of every user's bursts pooled over the alone p95"),
    Column("pooled_p95_slowdown_lo", "float", "x", "its lower bound"),
    Column("pooled_p95_slowdown_hi", "float", "x", "its upper bound"),
    Column("alone_p95_s", "float", "s", "the alone baseline's p95 (the alone cell: its own)"),
    Column("alone_p95_lo_s", "float", "s", "its lower bound"),
    Column("alone_p95_hi_s", "float", "s", "its upper bound"),
    Column("below_one", "bool", "", "a user faster shared than alone beyond doubt (a user's upper bound < 1)"),
    Column("reason", "str", "", "why the verdict is what it is (the alone cell: its interval's precision)"),
    Column(
        "stopped_by",
        "str",
        "",
        "why the cell ended: decided, precise (the alone cell), cap (its most bursts or its window), deadline",
    ),
)
COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
OPTIONAL_NAMES: tuple[str, ...] = tuple(c.name for c in OPTIONAL_COLUMNS)
DTYPES: dict[str, str] = {c.name: c.dtype for c in (*COLUMNS, *OPTIONAL_COLUMNS)}
EXTRA_PREFIX = "tel_"


def schema_table() -> list[dict[str, str]]:
    """The CSV schema as rows (column, type, unit, meaning) for the README and the report."""
    rows = [
        {"column": f"`{c.name}`", "type": c.dtype, "unit": c.unit or "-", "meaning": c.doc}
        for c in (*COLUMNS, *OPTIONAL_COLUMNS)
    ]
    rows.append(
        {
            "column": f"`{EXTRA_PREFIX}*`",
            "type": "float/str",
            "unit": "in the name",
            "meaning": "telemetry summary of the cell (sharebench.telemetry), same value on each replica row; "
            "absent: not measured",
        }
    )
    return rows
