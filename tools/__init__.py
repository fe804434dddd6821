"""The project's own tools, run from the repository root as ``python -m tools.NAME``: campaign helpers
(cell overhead, Nsight Compute summary, workloads README, combined workloads folder, headline spread,
MPS SM rounding), diagnostics (xtrack stages, CPU vs PoCL, burst overhead, particle cache), the
generated ring's design, the checks of generated files (``reference --check``, ``pipelines_sync``: sync
hooks of the quick loop), and the import-linter plugin (``importlinter_package_dir``). They import the
library; the library never imports them (an import-linter contract)."""
