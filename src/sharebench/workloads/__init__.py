"""What a replica runs: the workload layer, between the sharing executors and the Simpletrack kernel.

A replica is one process, ``python -m sharebench.workloads.replica`` (:data:`REPLICA_MODULE`): it runs
the Simpletrack kernel (``sharebench.kernel``) or any program through the replica protocol.

Modules:

* ``replica``: the replica process entry (one cell, or ``--serve``: cell after cell, warm);
* ``protocol``: the replica protocol for any program (``--engine exec``): its environment, barrier
  helpers and result file; ``program``: the harness's side of it (:func:`run_exec`);
* ``workload``: the Workload value (engine, device, command, timing, lattice, seed, pattern): what every
  replica of a sweep runs, one value from the CLI (and the KFP ``workload`` parameter) to the replica;
* ``job``: the ReplicaJob, one replica's job (the Workload, the kernel's run, the barrier, the pattern's
  cell fields): what the replica process reads;
* ``train``, ``resnet``: the built-in ML workload (ResNet-18 training in plain PyTorch).
"""

from sharebench.workloads.job import PROGRESS_NAME, ReplicaJob, attempt_of
from sharebench.workloads.workload import DEFAULT_WORKLOAD, VICTIM, Workload, role

REPLICA_MODULE = "sharebench.workloads.replica"  # python -m REPLICA_MODULE --config JOB.json --out REC.json

__all__ = [
    "DEFAULT_WORKLOAD",
    "PROGRESS_NAME",
    "REPLICA_MODULE",
    "VICTIM",
    "ReplicaJob",
    "Workload",
    "attempt_of",
    "role",
]
