"""Where the project and the material beside it (../shared) are."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("SHAREBENCH_SHARED", ROOT.parent / "shared"))
LHC_LINE = SHARED / "lattices" / "lhc_simpletrack_7tev.json.gz"
