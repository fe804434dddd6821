"""Compile the pipelines to the YAML committed under pipelines/ (``sharebench compile``)."""

from __future__ import annotations

from pathlib import Path

from kfp import compiler

from sharebench.pipelines.sweep_pipeline import PIPELINES

HERE = Path(__file__).resolve().parent


def compile_all(out_dir: Path | str = HERE) -> list[Path]:
    """Write every pipeline's YAML into ``out_dir``; return the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, pipeline in PIPELINES.items():
        path = out / name
        compiler.Compiler().compile(pipeline_func=pipeline, package_path=str(path))
        paths.append(path)
    return paths
