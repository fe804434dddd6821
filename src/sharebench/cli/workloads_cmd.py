"""``sharebench run --engine exec``: the Workload its options give (the options, checked: ``sharebench.cli.workloads``)."""

from __future__ import annotations

from typing import Any

from sharebench.workloads import Workload


def make_workload(given: dict[str, Any]) -> Workload:
    """The Workload of the keys given (the others take their defaults)."""
    return Workload.from_dict({k: v for k, v in given.items() if v is not None})
