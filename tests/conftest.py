"""Shared test fixtures. Area-specific fixtures live in their own test modules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SHAREBENCH_SHARED", ROOT.parent / "shared"))
LHC_LINE = SHARED / "lattices" / "lhc_simpletrack_7tev.json.gz"


@pytest.fixture(scope="session")
def lhc_line_path() -> Path:
    """The real LHC lattice from ../shared (tests may read it; the product must not)."""
    if not LHC_LINE.exists():
        pytest.skip(f"real LHC lattice not found at {LHC_LINE}")
    return LHC_LINE
