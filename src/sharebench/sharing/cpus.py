"""Disjoint core sets for ``partition:N`` on the CPU (the CPU analogue of MIG slices)."""

from __future__ import annotations

from pathlib import Path

from sharebench.devices.host import usable_cpus
from sharebench.errors import UserError
from sharebench.parse import format_cpu_set


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
        raise UserError(
            f"partition:{n} needs at least {n} cores; this process may use {len(cpus)} ({format_cpu_set(cpus)})"
        )
    groups = _core_groups(cpus)
    if len(groups) >= n and len({len(g) for g in groups}) == 1:
        per = len(groups) // n
        return [sorted(c for g in groups[i * per : (i + 1) * per] for c in g) for i in range(n)]
    per = len(cpus) // n
    return [cpus[i * per : (i + 1) * per] for i in range(n)]
