"""How long a cell of a sweep may track (issue 27): every wait is bounded.

:class:`RunBound` is a cell's run timeout: ``--run-timeout`` when given, else a multiple of the exclusive run
measured at its size; before one is measured, the same from a predicted exclusive run (:func:`run_bound`:
the calibration of a budget plan, or the recorded results of the GPU model), never above
:data:`FIRST_RUN_TIMEOUT_S`. A replica that never ends fails its cell, not the whole sweep.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from sharebench.errors import UserError
from sharebench.modes import BASELINE
from sharebench.results import RESULTS_CSV, load_results
from sharebench.sweep.budget import RECORDED_ROOT, Calibration, model_key, recorded_calibration
from sharebench.sweep.plan import SweepPlan

# the default run timeout, when --run-timeout is not given (RunBound): every cell's wait ends
RUN_TIMEOUT_FLOOR_S = 60.0
RUN_TIMEOUT_FACTOR = 20.0
# before any exclusive run of the sweep is measured: the ceiling of a predicted run timeout, and the timeout
# itself when nothing predicts the exclusive run (no recorded results of the GPU model, no calibration)
FIRST_RUN_TIMEOUT_S = 3600.0
PREDICTED_SETUP_S = 120.0  # a replica's set-up (kernel build, upload) allowed beside a predicted track time
RECORDED_ENGINE = "simpletrack"  # the engine the recorded results (sweep.budget.recorded_results) measured
Prediction = Calibration  # what predicts the exclusive run before one is measured (a calibration's rates)


@dataclass
class RunBound:
    """How long a cell may track (``CellRun.run_timeout_s``): ``--run-timeout`` when given, else
    max(60 s, 20 x the exclusive replica's track_s at the cell's size + its setup_s), the longest exclusive
    run of that size measured in the folder; a size not measured yet scales the nearest measured size's
    track time by the particle counts. Before any exclusive run is measured, the same from the
    ``predicted`` exclusive track time (the recorded results of the GPU model, or the sweep's calibration)
    and ``predicted_setup_s``, never above :data:`FIRST_RUN_TIMEOUT_S` (1 h); nothing predicted: 1 h.
    A replica that never ends (stopped with SIGSTOP while tracking, a hung program) fails its cell, not
    the whole sweep."""

    given: float | None = None
    exclusive: dict[int, tuple[float, float]] = field(default_factory=dict)  # particles -> (track_s, setup_s)
    predicted: Calibration | None = None  # the exclusive run's track time before one is measured
    predicted_setup_s: float = 0.0

    def learn(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Keep the exclusive runs' times among ``rows`` (results rows)."""
        for r in rows:
            if r.get("mode_kind") != BASELINE or r.get("status") != "ok":
                continue
            try:
                p, track, setup = int(r["particles"]), float(r["track_s"]), float(r.get("setup_s") or 0.0)
            except (KeyError, TypeError, ValueError):
                continue
            setup = setup if math.isfinite(setup) else 0.0
            if p > 0 and math.isfinite(track) and track >= 0:
                old = self.exclusive.get(p, (0.0, 0.0))
                self.exclusive[p] = (max(old[0], track), max(old[1], setup))

    def timeout_s(self, particles: int) -> float:
        if self.given is not None:
            return self.given
        if not self.exclusive:
            track = self.predicted_track_s(particles)
            if track is None:
                return FIRST_RUN_TIMEOUT_S
            bound = max(RUN_TIMEOUT_FLOOR_S, RUN_TIMEOUT_FACTOR * track + self.predicted_setup_s)
            return min(FIRST_RUN_TIMEOUT_S, bound)
        near = min(self.exclusive, key=lambda p: abs(math.log(p / max(particles, 1))))
        track, setup = self.exclusive[near]
        return max(RUN_TIMEOUT_FLOOR_S, RUN_TIMEOUT_FACTOR * track * max(particles, 1) / near + setup)

    def predicted_track_s(self, particles: int) -> float | None:
        """The predicted exclusive track time at ``particles`` (None: no prediction, or not a finite one)."""
        if self.predicted is None or not self.predicted.rates:
            return None
        track = self.predicted.exclusive_s(max(particles, 1))
        return track if math.isfinite(track) and track > 0 else None

    def waiting(self, particles: int, *, brief: bool = False) -> str:
        """What a cell waits for and its limit, while no exclusive run is measured ('' once one is, or
        with --run-timeout): stderr's answer to a bar at 0%; ``brief``: the progress bar's."""
        if self.given is not None or self.exclusive:
            return ""
        limit = self.timeout_s(particles)
        track = self.predicted_track_s(particles)
        if brief:
            why = "no prediction" if track is None else f"predicted {track:.3g} s"
            return f"first runs: timeout {limit:.0f} s ({why}; ceiling {FIRST_RUN_TIMEOUT_S:g} s)"
        if track is None:
            why = "nothing predicts it: no recorded results of this GPU model, no calibration"
        else:
            capped = " (capped)" if limit >= FIRST_RUN_TIMEOUT_S else ""
            why = f"{RUN_TIMEOUT_FACTOR:g} x the predicted {track:.3g} s{capped}"
        return (
            f"waiting for its replicas to track {particles:,} particles; run timeout {limit:.0f} s ({why}; "
            f"ceiling {FIRST_RUN_TIMEOUT_S:g} s until an exclusive run is measured)"
        )


def run_bound(plan: SweepPlan, out: Path, notes: list[str], calibration: Calibration | None = None) -> RunBound:
    """The sweep's run timeouts (:class:`RunBound`), seeded with a resumed folder's exclusive runs; before
    one is measured, predicted from ``calibration`` (a budget's) or the recorded results of the GPU model."""
    bound = RunBound(plan.config.run_timeout_s)
    if bound.given is None:
        if plan.config.resume and (out / RESULTS_CSV).exists():
            df = load_results(out)
            bound.learn(df[df["engine"] == plan.workload].to_dict("records"))
        source = predict_exclusive(bound, plan, calibration)
        notes.append(
            f"run timeout: no --run-timeout; a cell may track max({RUN_TIMEOUT_FLOOR_S:g} s, "
            f"{RUN_TIMEOUT_FACTOR:g} x the exclusive run's track_s + setup_s) at its size; before an exclusive "
            f"run is measured, the same from {source}, at most {FIRST_RUN_TIMEOUT_S:g} s"
        )
        first = bound.waiting(plan.particles[0]) if plan.particles else ""
        if first:
            tqdm.write(f"sharebench: first cell: {first}", file=sys.stderr)
    return bound


def predict_exclusive(bound: RunBound, plan: SweepPlan, calibration: Calibration | None) -> str:
    """Give ``bound`` a predicted exclusive run (the calibration's, else the recorded results of the
    plan's GPU model for the recorded engine and default lattice) and say where it comes from."""
    if calibration is not None and calibration.rates:
        bound.predicted, bound.predicted_setup_s = calibration, PREDICTED_SETUP_S
        return f"the calibration ({calibration.source})"
    model = model_key(plan.device.name)
    if not model or plan.workload != RECORDED_ENGINE or not plan.particles:
        return "nothing (no recorded results apply to this device and workload)"
    if plan.run_config(plan.particles[0]).lattice is not None:
        return "nothing (the recorded results track the default lattice)"
    try:
        recorded, _ = recorded_calibration(model, RECORDED_ROOT, plan.turns, backend=plan.device.backend)
    except (UserError, ValueError, KeyError, OSError) as exc:
        return f"nothing ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    bound.predicted, bound.predicted_setup_s = recorded, PREDICTED_SETUP_S
    return f"the recorded results of {model} ({recorded.source})"
