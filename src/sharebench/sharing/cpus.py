"""Disjoint core sets for ``partition:N`` on the CPU (the CPU analogue of MIG slices)."""

from __future__ import annotations

import os
from pathlib import Path

from sharebench.errors import UserError
from sharebench.results import format_cpus


def usable_cpus() -> list[int]:
    """The cores this process may run on (its affinity mask)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _core_groups(cpus: list[int]) -> list[list[int]]:
    """Logical CPUs grouped by physical core (hyperthread siblings stay together)."""
    groups: dict[str, list[int]] = {}
    for c in cpus:
        key = str(c)
        for name in ("core_cpus_list", "thread_siblings_list"):
            p = Path(f"/sys/devices/system/cpu/cpu{c}/topology/{name}")
            try:
                key = p.read_text().strip()
                break
            except OSError:
                continue
        groups.setdefault(key, []).append(c)
    return sorted(groups.values(), key=lambda g: g[0])


def partition_cpus(n: int, cpus: list[int] | None = None) -> list[list[int]]:
    """N disjoint, equal-sized core sets; siblings of one physical core never split.

    Leftover cores (when the count does not divide) stay unused so that every
    partition has the same size.
    """
    cpus = sorted(cpus if cpus is not None else usable_cpus())
    if n < 1:
        raise UserError(f"partition count must be >= 1 (got {n})")
    if n > len(cpus):
        raise UserError(f"partition:{n} needs at least {n} cores; this process may use {len(cpus)} "
                        f"({format_cpus(cpus)})")
    groups = _core_groups(cpus)
    if len(groups) >= n and len({len(g) for g in groups}) == 1:
        per = len(groups) // n
        return [sorted(c for g in groups[i * per:(i + 1) * per] for c in g) for i in range(n)]
    per = len(cpus) // n
    return [cpus[i * per:(i + 1) * per] for i in range(n)]
