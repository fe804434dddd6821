"""import-linter sees the subpackages that ``[tool.setuptools.package-dir]`` installs from elsewhere.

``sharebench.components`` and ``sharebench.pipelines`` live in components/ and pipelines/ at the top
of the repository, not under src/sharebench, so grimp (which walks the root package's folder) would
not see them and the layers contract could not place them. Importing this module (import-linter
does, for ``contract_types`` in pyproject.toml) tells grimp, through its own settings, to scan each
mapped folder as the subpackage it installs as. The contract type it adds, ``package_dir``, checks
that every mapped subpackage is in the graph, so that a contract over them can never pass by not
seeing them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

from grimp.application.config import settings
from importlinter import Contract, ContractCheck, fields, output

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found]  # import-linter's own dependency on 3.10


def package_dirs(pyproject: Path) -> dict[str, str]:
    """Subpackage name -> its folder, from ``[tool.setuptools.package-dir]`` (the root mapping left out)."""
    mapping = tomllib.loads(pyproject.read_text())["tool"]["setuptools"].get("package-dir", {})
    root = pyproject.resolve().parent
    return {name: str((root / folder).resolve()) for name, folder in mapping.items() if name}


MAPPED = package_dirs(Path.cwd() / "pyproject.toml")


class PackageFinder:
    """grimp's package finder, plus the mapped folders of the root packages' subpackages."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def determine_package_directories(self, package_name: str, file_system: Any) -> set[str]:
        found: set[str] = self.inner.determine_package_directories(package_name, file_system)
        return found | {d for name, d in MAPPED.items() if name.split(".")[0] == package_name}


class ModuleFinder:
    """grimp's module finder; a mapped folder is scanned as the subpackage it installs as."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def find_package(self, package_name: str, package_directory: str, file_system: Any) -> Any:
        name = next((n for n, d in MAPPED.items() if d == str(Path(package_directory).resolve())), package_name)
        return self.inner.find_package(package_name=name, package_directory=package_directory, file_system=file_system)


if not isinstance(settings.PACKAGE_FINDER, PackageFinder):
    settings.configure(PACKAGE_FINDER=PackageFinder(settings.PACKAGE_FINDER))
    settings.configure(MODULE_FINDER=ModuleFinder(settings.MODULE_FINDER))


class PackageDirContract(Contract):
    """Every named subpackage is in the import graph (with at least one module below it)."""

    packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        names = cast("list[str]", self.packages)  # a ListField, read as its value
        missing = [p for p in names if p not in graph.modules or not graph.find_children(p)]
        return ContractCheck(kept=not missing, metadata={"missing": missing})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for name in check.metadata["missing"]:
            output.print_error(f"{name} is not in the import graph (is it in [tool.setuptools.package-dir]?)")
