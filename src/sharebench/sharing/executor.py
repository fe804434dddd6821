"""Run one cell: N replica processes sharing one device, started together.

Each replica is ``python -m sharebench.workloads.replica --config CFG.json --out REC.json``.
The start barrier: every replica builds, makes its particles and warms up,
then touches its ready file and waits for the start file. The parent waits for
all ready files (failing fast when a replica dies first, with a timeout), then
writes the start file atomically, holding an epoch instant slightly in the
future, so all N begin tracking at the same moment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sharebench.devices import DeviceInfo
from sharebench.errors import UserError, one_line
from sharebench.files import write_atomic
from sharebench.kernel import RunConfig
from sharebench.modes import Mode
from sharebench.parse import format_cpu_set
from sharebench.results.store import read_json
from sharebench.sharing.layout import CellPlan, ReplicaPlan, plan_cell
from sharebench.sharing.mps import MpsDaemon, exec_client_check
from sharebench.sharing.pool import ReplicaPool, Worker, die_with_parent
from sharebench.workloads import REPLICA_MODULE

_STOPPED = "stopped: another replica of the cell failed first"


# ----------------------------------------------------------------------- processes


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        tail = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()][-lines:]
    except OSError:
        return ""
    return " | ".join(tail)


def _stop(procs: list[subprocess.Popen | Worker], grace_s: float = 5.0) -> None:
    """Stop the replicas still running (a warm one whose record is written is left alone)."""
    running = [p for p in procs if p.poll() is None]
    for p in running:
        try:
            p.terminate()
        except OSError:
            pass
    deadline = time.monotonic() + grace_s
    for p in running:
        try:
            p.wait(timeout=max(0.05, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_cell(
    mode: Mode | str,
    cfg: RunConfig | dict[str, Any],
    workdir: Path | str,
    *,
    device: DeviceInfo | dict[str, Any] | None = None,
    plan: CellPlan | None = None,
    ready_timeout_s: float = 900.0,
    run_timeout_s: float | None = None,
    start_delay_s: float = 0.5,
    python: str = sys.executable,
    poll_s: float = 0.02,
    pool: ReplicaPool | None = None,
) -> list[dict[str, Any]]:
    """Run the N replicas of one cell; return one dict per replica (record or error).

    Every dict carries ``replica``, ``status`` ("ok"/"failed"), ``error``,
    ``cell_status``/``cell_error`` and the placement columns (``device_spec``,
    ``cpus``, ``cores``, ``sms``, ``mig_profile``, ``parent_uuid``,
    ``thread_pct``); ok ones carry the RunRecord fields. A crashed replica does
    not lose the others' records: the cell is marked failed with its error.
    KeyboardInterrupt (Ctrl-C, SIGTERM under MPS) stops every replica and the
    MPS daemon, then propagates.

    With ``pool``, the replicas are warm ones (``sharebench.sharing.pool``): processes kept from
    earlier cells, under the pool's MPS daemon, started ``pool.start_delay_s`` after the barrier; the
    exec engine's programs always start fresh.
    """
    if plan is None:
        if device is None:
            raise TypeError("run_cell needs device= or plan=")
        plan = plan_cell(mode, device)
    base = (cfg if isinstance(cfg, RunConfig) else RunConfig.from_dict(dict(cfg))).to_dict()
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    if base.get("engine") == "exec":
        pool = None
    if pool is not None:
        start_delay_s = pool.start_delay_s
    if plan.mps:
        if pool is not None:
            return _run_mps(
                pool.mps_daemon(plan.device, plan.mode.label),
                plan,
                base,
                wd,
                ready_timeout_s,
                run_timeout_s,
                start_delay_s,
                python,
                poll_s,
                pool,
            )
        with MpsDaemon(plan.device, keep_logs_in=wd, mode_label=plan.mode.label) as mps:
            return _run_mps(mps, plan, base, wd, ready_timeout_s, run_timeout_s, start_delay_s, python, poll_s, None)
    return _run(plan, base, wd, {}, ready_timeout_s, run_timeout_s, start_delay_s, python, poll_s, pool=pool)


def replica_config(base: dict[str, Any], plan: CellPlan, rp: ReplicaPlan, **extra: Any) -> dict[str, Any]:
    """One replica's run config: the cell's, with its index, device, CPUs and memory limit (a MIG
    instance's, unless the run sets its own)."""
    cfg = dict(base, replica=rp.replica, replicas=plan.n, device=rp.device, cpus=rp.cpus, **extra)
    if rp.memory_bytes and not cfg.get("mem_limit_bytes"):
        cfg["mem_limit_bytes"] = rp.memory_bytes
    return cfg


def prime_pool(
    pool: ReplicaPool, plans: list[CellPlan], cfg: RunConfig | dict[str, Any], ready_timeout_s: float = 900.0
) -> list[str]:
    """Start, and set up all at once, the warm replicas the cells of ``plans`` will need (as many of each
    kind as the largest of those cells), before any cell is measured; the MPS cells' replicas under
    the pool's daemon. One line per replica that could not set up (the exec engine: none started)."""
    base = (cfg if isinstance(cfg, RunConfig) else RunConfig.from_dict(dict(cfg))).to_dict()
    if base.get("engine") == "exec":
        return []
    need: dict[tuple, list] = {}
    for plan in plans:
        env0 = pool.mps_daemon(plan.device, plan.mode.label).client_env(plan.mode.thread_pct) if plan.mps else {}
        here: dict[tuple, list] = {}
        for rp in plan.replicas:
            env = {**env0, **rp.env}
            job = replica_config(base, plan, rp)
            here.setdefault(pool.key(rp.device, rp.cpus, env), []).append((rp.device, rp.cpus, env, job))
        for key, jobs in here.items():
            if len(jobs) > len(need.get(key, [])):
                need[key] = jobs
    return pool.prime([job for jobs in need.values() for job in jobs], timeout_s=ready_timeout_s)


def _run_mps(
    mps: MpsDaemon,
    plan: CellPlan,
    base: dict,
    wd: Path,
    ready_timeout_s: float,
    run_timeout_s: float | None,
    start_delay_s: float,
    python: str,
    poll_s: float,
    pool: ReplicaPool | None,
) -> list[dict[str, Any]]:
    env = mps.client_env(plan.mode.thread_pct)
    # all replicas created their GPU contexts before the barrier: each must be an MPS client
    # (SHAREBENCH_MPS_CHECK=0 skips the check, e.g. where the daemon sees other PID namespaces)
    check = None if os.environ.get("SHAREBENCH_MPS_CHECK", "1") == "0" else mps.check_clients
    if base.get("engine") == "exec":  # the clients are the programs the replicas started
        check = exec_client_check(check, base.get("exec_timing"))
    return _run(
        plan, base, wd, env, ready_timeout_s, run_timeout_s, start_delay_s, python, poll_s, check_ready=check, pool=pool
    )


def _run(
    plan: CellPlan,
    base: dict,
    wd: Path,
    extra_env: dict[str, str],
    ready_timeout_s: float,
    run_timeout_s: float | None,
    start_delay_s: float,
    python: str,
    poll_s: float,
    check_ready: Callable[[list[int]], str] | None = None,
    pool: ReplicaPool | None = None,
) -> list[dict[str, Any]]:
    if pool is None:
        return _run_replicas(
            plan, base, wd, extra_env, ready_timeout_s, run_timeout_s, start_delay_s, python, poll_s, check_ready, None
        )
    workers: list[Worker] = []
    rows: list[dict[str, Any]] = []
    try:
        rows = _run_replicas(
            plan,
            base,
            wd,
            extra_env,
            ready_timeout_s,
            run_timeout_s,
            start_delay_s,
            python,
            poll_s,
            check_ready,
            pool,
            workers,
        )
    finally:  # warm replicas of a cell that went well wait for the next; the others end
        pool.release(workers, ok=bool(rows) and all(r["cell_status"] == "ok" for r in rows))
    return rows


def _run_replicas(
    plan: CellPlan,
    base: dict,
    wd: Path,
    extra_env: dict[str, str],
    ready_timeout_s: float,
    run_timeout_s: float | None,
    start_delay_s: float,
    python: str,
    poll_s: float,
    check_ready: Callable[[list[int]], str] | None,
    pool: ReplicaPool | None,
    workers: list[Worker] | None = None,
) -> list[dict[str, Any]]:
    start_file = wd / "start"
    for stale in [start_file, *wd.glob("ready.*"), *wd.glob("record.*.json")]:
        stale.unlink(missing_ok=True)
    procs: list[subprocess.Popen | Worker] = []
    logs, outs, readies = [], [], []
    errors: dict[int, str] = {}
    try:
        for rp in plan.replicas:
            cfg = replica_config(
                base,
                plan,
                rp,
                ready_file=str(wd / f"ready.{rp.replica}"),
                start_file=str(start_file),
                start_at=base.get("start_at"),
            )
            cfg_path, out_path, log_path = (
                wd / f"config.{rp.replica}.json",
                wd / f"record.{rp.replica}.json",
                wd / f"replica.{rp.replica}.log",
            )
            cfg_path.write_text(json.dumps(cfg, indent=2))
            if pool is not None and workers is not None:
                w = pool.acquire(rp.device, rp.cpus, {**extra_env, **rp.env})
                workers.append(w)
                w.send(cfg_path, out_path, log_path)
                procs.append(w)
            else:
                env = dict(os.environ, **extra_env, **rp.env, PYTHONUNBUFFERED="1")
                with log_path.open("w") as log:
                    procs.append(
                        subprocess.Popen(
                            [python, "-m", REPLICA_MODULE, "--config", str(cfg_path), "--out", str(out_path)],
                            env=env,
                            stdout=log,
                            stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL,
                            start_new_session=True,
                            preexec_fn=die_with_parent if sys.platform == "linux" else None,
                        )
                    )
            logs.append(log_path)
            outs.append(out_path)
            readies.append(Path(cfg["ready_file"]))

        # barrier: all ready, or fail fast
        deadline = time.monotonic() + ready_timeout_s
        while not all(r.exists() for r in readies):
            dead = [i for i, p in enumerate(procs) if p.poll() is not None and not readies[i].exists()]
            if dead:
                for i in dead:
                    errors[i] = _replica_error(outs[i], logs[i], procs[i].returncode, "before the start barrier")
                _stop(procs)
                break
            if time.monotonic() > deadline:
                for i, r in enumerate(readies):
                    if not r.exists():
                        errors[i] = f"not ready after {ready_timeout_s:g} s (setup too slow or hung)"
                _stop(procs)
                break
            time.sleep(poll_s)
        else:
            reason = check_ready([p.pid for p in procs]) if check_ready is not None else ""
            if reason:
                _stop(procs)
                stopped = {
                    rp.replica: "stopped before tracking: the cell's check failed (see cell_error)"
                    for rp in plan.replicas
                }
                return _collect(plan, outs, logs, procs, stopped, cell_error=reason)
            write_atomic(start_file, repr(time.time() + start_delay_s))
            run_deadline = None if run_timeout_s is None else time.monotonic() + start_delay_s + run_timeout_s
            while any(p.poll() is None for p in procs):
                if run_deadline is not None and time.monotonic() > run_deadline:
                    for i, p in enumerate(procs):
                        if p.poll() is None:
                            errors[i] = f"still running {run_timeout_s:g} s after the start; stopped"
                    _stop(procs)
                    break
                time.sleep(poll_s)
    except BaseException:
        _stop(procs)
        raise
    return _collect(plan, outs, logs, procs, errors)


def _record(path: Path) -> dict[str, Any] | None:
    """A replica's record (or its error record); None when it wrote none or a torn one."""
    try:
        return read_json(path, "record")
    except UserError:
        return None


def _replica_error(out: Path, log: Path, rc: int | None, when: str = "") -> str:
    data = _record(out)
    if data and data.get("error"):
        return one_line(data["error"], 400)
    tail = _log_tail(log)
    what = f"exited with status {rc}" + (f" {when}" if when else "")
    return one_line(f"{what}: {tail}" if tail else what, 400)


def _collect(plan: CellPlan, outs, logs, procs, errors: dict[int, str], cell_error: str = "") -> list[dict[str, Any]]:
    rows = []
    for rp, out, log, p in zip(plan.replicas, outs, logs, procs):
        row: dict[str, Any] = {}
        err = errors.get(rp.replica)
        if err is None:
            data = _record(out)
            if data and not data.get("error") and p.returncode == 0:
                row.update(data)
            elif (errors or cell_error) and p.returncode is not None and p.returncode < 0:
                err = _STOPPED
            else:
                err = _replica_error(out, log, p.returncode)
        row.update(
            replica=rp.replica,
            device_spec=plan.device.spec or rp.device,
            cpus=format_cpu_set(rp.cpus) if rp.cpus else "",
            cores=rp.cores,
            sms=rp.sms,
            mig_profile=rp.mig_profile,
            # the physical GPU: the MIG instance's parent, else the device the replica itself reported
            parent_uuid=(rp.parent_uuid if rp.mig_uuid else row.get("device_uuid") or rp.parent_uuid),
            thread_pct=replica_thread_pct(plan, rp),
            status="failed" if err else "ok",
            error=err or "",
        )
        rows.append(row)
    failed = [r for r in rows if r["status"] == "failed"]
    causes = [r for r in failed if r["error"] != _STOPPED] or failed  # the root cause, not its victims
    if not cell_error:
        cell_error = "; ".join(f"replica {r['replica']}: {r['error']}" for r in causes)
    if not cell_error:
        cell_error = check_devices(plan, rows)
    for r in rows:
        r["cell_status"] = "failed" if cell_error else "ok"
        r["cell_error"] = cell_error
    return rows


def replica_thread_pct(plan: CellPlan, rp: ReplicaPlan) -> int | None:
    """The MPS thread percentage a replica ran with: its own (mig-emulated), else the mode's (mps:N@PCT)."""
    own = rp.env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
    if own:
        return int(own)
    return plan.mode.thread_pct if plan.mps else None


def check_devices(plan: CellPlan, rows: list[dict[str, Any]]) -> str:
    """'' if all replicas ran on the same physical device (MIG: the assigned instances of one GPU)."""
    seen = [str(r.get("device_uuid") or "") for r in rows]
    if plan.mode.kind == "mig":
        wrong = [
            f"replica {rp.replica} on {u or '?'} instead of {rp.mig_uuid}"
            for rp, u in zip(plan.replicas, seen)
            if u and u != rp.mig_uuid
        ]
        parents = {rp.parent_uuid for rp in plan.replicas}
        if wrong:
            return "replicas not on their MIG instances: " + ", ".join(wrong)
        if len(parents) > 1:
            return "MIG instances on different GPUs: " + ", ".join(sorted(parents))
        return ""
    distinct = sorted(set(seen))
    if len(distinct) > 1:
        return "replicas ran on different devices: " + ", ".join(d or "?" for d in distinct)
    return ""
