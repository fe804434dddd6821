"""Storage: the results CSV and every JSON document, one version convention for all (see schema).

Nothing here measures or probes: the runner hands rows and documents in, the analysis and the
report read them back.
"""

from sharebench.results.folder import (
    CELLS_DIR,
    DCGM_CSV,
    NOTES_TXT,
    PROVENANCE_JSON,
    RESULTS_CSV,
    SWEEP_JSON,
    append_notes,
    append_sweep,
    read_notes,
    read_provenance,
    read_sweeps,
    sweeps_warning,
    write_provenance,
)
from sharebench.results.schema import (
    COLUMN_NAMES,
    COLUMNS,
    DOCUMENTS,
    EXTRA_PREFIX,
    SCHEMA_VERSION,
    Column,
    schema_table,
)
from sharebench.results.store import read_json, write_json
from sharebench.results.table import ResultsWriter, load_results

__all__ = [
    "CELLS_DIR",
    "COLUMNS",
    "COLUMN_NAMES",
    "DCGM_CSV",
    "DOCUMENTS",
    "EXTRA_PREFIX",
    "NOTES_TXT",
    "PROVENANCE_JSON",
    "RESULTS_CSV",
    "SCHEMA_VERSION",
    "SWEEP_JSON",
    "Column",
    "ResultsWriter",
    "append_notes",
    "append_sweep",
    "load_results",
    "read_json",
    "read_notes",
    "read_provenance",
    "read_sweeps",
    "schema_table",
    "sweeps_warning",
    "write_json",
    "write_provenance",
]
