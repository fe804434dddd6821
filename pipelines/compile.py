"""Compile the pipelines to the YAML committed under pipelines/ (``sharebench compile``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from kfp import compiler

from sharebench.pipelines.sweep_pipeline import PIPELINES

HERE = Path(__file__).resolve().parent
# the header's line for a dict parameter (the `workload` struct): KFP writes its default in the order of
# a protobuf map, which changes from one process to the next
DICT_DEFAULT = re.compile(r"^(#    \w+: dict \[Default: )(\{.*\})(\])$", re.MULTILINE)


def sort_dict_defaults(text: str) -> str:
    """The compiled YAML with every dict default of its header comment in key order, so that the
    committed YAML is the same from one compile to the next."""

    def ordered(m: re.Match[str]) -> str:
        value = ast.literal_eval(m.group(2))
        return m.group(1) + str(dict(sorted(value.items()))) + m.group(3)

    return DICT_DEFAULT.sub(ordered, text)


def compile_all(out_dir: Path | str = HERE) -> list[Path]:
    """Write every pipeline's YAML into ``out_dir``; return the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, pipeline in PIPELINES.items():
        path = out / name
        compiler.Compiler().compile(pipeline_func=pipeline, package_path=str(path))
        path.write_text(sort_dict_defaults(path.read_text()))
        paths.append(path)
    return paths
