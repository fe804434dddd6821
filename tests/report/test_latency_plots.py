"""The latency figures (report.latency) from synthetic per-burst rows: files written, reproducible, one
panel per pattern, nothing drawn without data."""

from __future__ import annotations

import matplotlib.image as mpimg
import numpy as np
import pandas as pd

from sharebench.analysis.latency import latency_table
from sharebench.report.latency import (
    LATENCY_PLOT,
    USERS_PLOT,
    make_latency_plots,
    plot_latency_distributions,
    plot_users_per_gpu,
)

USER = "interactive:burst=10,think=0.5"


def bursts(patterns=(USER,), neighbours=None, seed=0):
    """Per-burst rows: exclusive, timeslice:2/4 and mps:2/4 cells, 3 repeats, 60 bursts a replica."""
    rng = np.random.default_rng(seed)
    factor = {"exclusive": 1.0, "timeslice:2": 1.7, "timeslice:4": 3.2, "mps:2": 1.3, "mps:4": 1.8}
    rows = []
    for pattern in patterns:
        for mode, f in factor.items():
            n = 1 if mode == "exclusive" else int(mode.split(":")[1])
            for rep in (1, 2, 3):
                for r in range(n):
                    t = 100.0
                    role = "victim" if r == 0 else "neighbour"
                    pat = pattern if r == 0 or neighbours is None else neighbours
                    for lat in 0.01 * f * rng.lognormal(0, 0.25, 60):
                        rows.append(
                            dict(
                                cell_id=f"{pattern}_{mode}_r{rep}",
                                mode=mode,
                                replica=r,
                                role=role,
                                pattern=pat,
                                repeat=rep,
                                arrival=t,
                                start=t,
                                end=t + lat,
                                units=10,
                            )
                        )
                        t += lat + 0.05
    return pd.DataFrame(rows)


def test_both_figures_are_written_and_reproducible(tmp_path):
    df = bursts()
    table = latency_table(df, n_resamples=200)
    paths = make_latency_plots(df, table, tmp_path / "a")
    assert [p.name for p in paths] == [
        f"{LATENCY_PLOT}.png",
        f"{LATENCY_PLOT}.svg",
        f"{USERS_PLOT}.png",
        f"{USERS_PLOT}.svg",
    ]
    assert all(p.stat().st_size > 5000 for p in paths)
    assert (tmp_path / "a" / f"{USERS_PLOT}.svg").read_text().lstrip().startswith("<?xml")
    again = make_latency_plots(df, table, tmp_path / "b")
    assert [p.read_bytes() for p in paths] == [p.read_bytes() for p in again]
    moved = plot_users_per_gpu(table, tmp_path / "c", slo=3.0)  # another target: another figure
    assert moved[0].read_bytes() != paths[2].read_bytes()


def test_one_panel_per_pattern(tmp_path):
    one = plot_latency_distributions(bursts(), tmp_path / "one")[0]
    two_df = bursts(patterns=(USER, "serve:rate=10,size=1"))
    two = plot_latency_distributions(two_df, tmp_path / "two")[0]
    users = plot_users_per_gpu(latency_table(two_df, n_resamples=200), tmp_path / "two")[0]
    w1, w2 = mpimg.imread(one).shape[1], mpimg.imread(two).shape[1]
    assert 1.7 < w2 / w1 < 2.3
    assert 1.7 < mpimg.imread(users).shape[1] / w1 < 2.3


def test_noisy_neighbour_cells_draw_distributions_but_no_users_line(tmp_path):
    df = bursts(neighbours="batch")
    table = latency_table(df, n_resamples=200)
    assert plot_latency_distributions(df, tmp_path)  # the victim beside batch jobs, per mode
    assert plot_users_per_gpu(table, tmp_path) == []  # no cell of interactive users alone


def test_nothing_to_draw(tmp_path):
    assert make_latency_plots(pd.DataFrame(), pd.DataFrame(), tmp_path) == []
    assert not tmp_path.joinpath(f"{LATENCY_PLOT}.png").exists()
