"""Local sharing executors: exclusive, timeslice:N[/INTERVAL], mps:N[@PCT], mig:LAYOUT, mig-emulated:LAYOUT,
partition:N.

``plan_cell(mode, device)`` checks, before anything runs, that a mode can run on a device and lays
its replicas out (``plan``); ``run_cell(mode, cfg, workdir, plan=...)`` runs the N replica
processes of one cell behind a common start barrier and returns their rows (``executor``); the MPS
daemon (``mps``), existing MIG instances (``mig``) and CPU partitions (``cpus``) are its parts;
``ReplicaPool`` (``pool``) keeps warm replica processes from one cell to the next.
"""

from sharebench.sharing.cpus import partition_cpus
from sharebench.sharing.executor import prime_pool, run_cell
from sharebench.sharing.layout import CellPlan, ReplicaPlan, plan_cell
from sharebench.sharing.mig import MigInstance, find_mig_instances, parse_nvidia_smi_list, select_instances
from sharebench.sharing.mps import MpsDaemon, check_mps_available
from sharebench.sharing.orphans import find_orphans, stop_orphans
from sharebench.sharing.pool import ReplicaPool

__all__ = [
    "CellPlan",
    "MigInstance",
    "MpsDaemon",
    "ReplicaPlan",
    "ReplicaPool",
    "check_mps_available",
    "find_mig_instances",
    "find_orphans",
    "parse_nvidia_smi_list",
    "partition_cpus",
    "plan_cell",
    "prime_pool",
    "run_cell",
    "select_instances",
    "stop_orphans",
]
