"""Local sharing executors: exclusive, timeslice:N, mps:N[@PCT], mig:LAYOUT, partition:N.

``run_cell(mode, cfg, workdir, device=...)`` runs the N replica processes of one
cell behind a common start barrier and returns their records; ``plan_cell``
checks, before anything runs, that a mode can run on a device.
"""

from sharebench.sharing.cpus import partition_cpus, usable_cpus
from sharebench.sharing.executor import CellPlan, ReplicaPlan, device_dict, plan_cell, run_cell
from sharebench.sharing.mig import MigInstance, find_mig_instances, parse_nvidia_smi_list, select_instances
from sharebench.sharing.mps import MpsDaemon, check_mps_available

__all__ = [
    "CellPlan", "MigInstance", "MpsDaemon", "ReplicaPlan", "check_mps_available", "device_dict",
    "find_mig_instances", "parse_nvidia_smi_list", "partition_cpus", "plan_cell", "run_cell",
    "select_instances", "usable_cpus",
]
