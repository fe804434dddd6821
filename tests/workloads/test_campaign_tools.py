"""The workloads campaign's helpers (benchmarks/plans/workloads.toml): the Nsight Compute summary (on a CSV
in ncu's format) and the folder README (on a folder laid out as that campaign leaves it)."""

from __future__ import annotations

from tools import ncu_summary, workloads_readme

HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def ncu_rows(kid: int, name: str, regs: int, occ: float, time_value: str, unit: str) -> list[str]:
    pre = (
        f'"{kid}","1","python3","h","{name}","1","7","(128, 1, 1)","(100, 1, 1)","0","9.0",'
        '"Command line profiler metrics"'
    )
    return [
        f'{pre},"launch__registers_per_thread","register/thread","{regs}"',
        f'{pre},"sm__warps_active.avg.pct_of_peak_sustained_active","%","{occ}"',
        f'{pre},"gpu__time_duration.sum","{unit}","{time_value}"',
    ]


def test_ncu_summary_weights_by_kernel_time(tmp_path, capsys):
    text = "\n".join(
        [
            "==PROF== Connected to process 1",
            "program output line",
            HEADER,
            *ncu_rows(0, "track_kernel", 96, 31.0, "3,000", "usecond"),
            *ncu_rows(1, "small_kernel", 32, 91.0, "1", "msecond"),
        ]
    )
    (tmp_path / "simpletrack.csv").write_text(text + "\n")
    (tmp_path / "broken.csv").write_text("==ERROR== ERR_NVGPUCTRPERM\n")
    assert ncu_summary.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # 3 ms at 96 regs / 31% and 1 ms at 32 regs / 91%: weighted 80 regs, 46.0%
    assert "| simpletrack | 2 | 4.000 | 80 | 46.0 | `track_kernel` (3.000 ms, 96 regs, 31.0%) |" in out
    assert "| broken | 0 | — | — | — | — |" in out


def test_workloads_readme_quotes_the_folder(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    (tmp_path / "machine.txt").write_text("2026-12-03T05:00:00Z\nNVIDIA H200\n")
    (tmp_path / "commands.txt").write_text("python3 -m sharebench run --engine exec ...\n")
    (tmp_path / "results" / "report.md").write_text(
        "# r\n\n## Workloads: which mode suits which workload\n\n| workload |\n|---|\n| train |\n\n## Provenance\n\nx\n"
    )
    assert workloads_readme.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H200" in out and "--engine exec" in out
    assert "### Workloads: which mode suits which workload" in out and "| train |" in out
    assert "Provenance" not in out
