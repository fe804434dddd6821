"""A kind's per-cell helper (KindSpec.helper) is started by one launcher hook, from one table (issue 32)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sharebench.modes import KINDS, MPS_DAEMON
from sharebench.sharing import FreshLauncher, ReplicaPool, WarmLauncher, plan_cell
from sharebench.sharing.launch import HELPERS, Launcher
from support.contexts import device_of


def test_every_helper_a_kind_names_has_a_row():
    named = {s.helper for s in KINDS.values() if s.helper}
    assert named <= set(HELPERS), f"KindSpec.helper without a sharing.launch.HELPERS row: {named - set(HELPERS)}"
    assert MPS_DAEMON in named


def test_the_launcher_has_no_kind_named_method():
    assert not hasattr(Launcher, "mps")


@pytest.mark.parametrize("warm", [False, True])
def test_a_cell_without_a_helper_gets_none(tmp_path: Path, warm: bool):
    plan = plan_cell("timeslice:2", device_of("cpu"))
    assert plan.helper == ""
    with ReplicaPool(tmp_path / "pool") as pool:
        launcher = WarmLauncher(pool) if warm else FreshLauncher()
        with launcher.helper(plan, tmp_path) as helper:
            assert helper is None
        assert pool.mps is None  # nothing started
