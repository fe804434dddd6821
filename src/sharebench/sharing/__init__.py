"""Local sharing executors: exclusive, timeslice:N[/INTERVAL], mps:N[@PCT], mig:LAYOUT, mig-emulated:LAYOUT,
partition:N.

``plan_cell(mode, device)`` checks, before anything runs, that a mode can run on a device and lays
its replicas out (``layout``); ``run_cell(run, launcher)`` runs the N replica processes of one cell
(a :class:`CellRun`, built by ``cell_run(mode, cfg, folder, plan=...)``) behind a common start
barrier and returns their rows (``executor``). A ``Launcher`` (``launch``) starts and ends the
replicas: ``FreshLauncher`` (new processes per cell) or ``WarmLauncher`` (processes kept from one cell
to the next by a ``ReplicaPool``, ``pool``). The MPS daemon (``mps``), existing MIG instances
(``mig``) and CPU partitions (``cpus``) are its parts.
"""

from sharebench.sharing.cpus import partition_cpus
from sharebench.sharing.executor import cell_run, run_cell
from sharebench.sharing.launch import CellRun, FreshLauncher, Launcher, WarmLauncher
from sharebench.sharing.layout import CellPlan, ReplicaPlan, plan_cell
from sharebench.sharing.mig import MigInstance, find_mig_instances, parse_nvidia_smi_list, select_instances
from sharebench.sharing.mps import MpsDaemon, check_mps_available
from sharebench.sharing.orphans import find_orphans, stop_orphans
from sharebench.sharing.pool import ReplicaPool

__all__ = [
    "CellPlan",
    "CellRun",
    "FreshLauncher",
    "Launcher",
    "MigInstance",
    "MpsDaemon",
    "ReplicaPlan",
    "ReplicaPool",
    "WarmLauncher",
    "check_mps_available",
    "find_mig_instances",
    "find_orphans",
    "parse_nvidia_smi_list",
    "partition_cpus",
    "plan_cell",
    "cell_run",
    "run_cell",
    "select_instances",
    "stop_orphans",
]
