"""A patterned cell's live records read by the executor (sharebench.sharing.executor.LiveCell, issue 42), on
real replicas on the CPU: the watch sees every user's bursts as they end and its reason stops the cell (every
replica, victim included, keeps the bursts it did); a watch that fails loses nothing, the cell runs to its
limit."""

from __future__ import annotations

from sharebench.sharing import cell_run, run_cell
from sharebench.workloads import ReplicaJob, Workload
from support.contexts import device_of

USER = "interactive:burst=1,think=0.005"


def job(lattice, bursts: int) -> ReplicaJob:
    return ReplicaJob.of(
        Workload(device="cpu", lattice=str(lattice), pattern=USER, bursts=bursts), particles=200, turns=2
    )


def victim_bursts(rows) -> int:
    return len(rows[0]["extra"]["bursts"])


def test_the_watch_sees_every_users_bursts_and_its_reason_stops_the_cell(lattice, tmp_path):
    seen: list[dict[int, int]] = []

    def watch(bursts, elapsed_s):
        counts = {r: len(b) for r, b in bursts.items()}
        seen.append(counts)
        assert all(b.end >= b.arrival for bs in bursts.values() for b in bs) and elapsed_s > 0
        return "enough: 5 bursts each" if min(counts.values()) >= 5 else None

    rows = run_cell(cell_run("timeslice:2", job(lattice, 500), tmp_path / "c", device=device_of("cpu"), watch=watch))
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert set(seen[-1]) == {0, 1} and min(seen[-1].values()) >= 5  # both users, streamed as they ran
    assert 5 <= victim_bursts(rows) < 500 and len(rows[1]["extra"]["bursts"]) >= 5  # stopped long before its count
    assert (tmp_path / "c" / "stop").exists()


def test_a_watch_that_fails_loses_nothing(lattice, tmp_path):
    def broken(bursts, elapsed_s):
        raise RuntimeError("a bug in the watcher")

    rows = run_cell(cell_run("timeslice:2", job(lattice, 12), tmp_path / "c", device=device_of("cpu"), watch=broken))
    assert [r["status"] for r in rows] == ["ok", "ok"] and victim_bursts(rows) == 12  # to its limit, all kept
