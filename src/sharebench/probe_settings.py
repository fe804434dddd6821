"""The time-slice probe's settings: its grids, its switch-out threshold, the slice lengths a split predicts
the loss at.

The probe (``sharebench.telemetry.timeslice_probe``) and the split of a time-slicing loss
(``sharebench.analysis.timeslice_split``) read them, and so does ``sharebench probe --help``
(``sharebench.cli.probe``), which must not load the probe's stack (numpy, the kernel): so they are kept in
this module of the shared vocabulary, which imports nothing.
"""

GRIDS = ("one", "full")  # the probe on one block, or one block per SM
DEFAULT_THRESHOLD_US = 20.0  # a read-to-read jump longer than this is a switch-out (switches take ~0.2 ms)
DEFAULT_LENGTHS_MS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)  # the slice lengths a split predicts the loss at
NEIGHBOURS = ("light", "stream", "heavy")  # the probe's kernels: clock reads only, or streaming over a buffer
DEFAULT_NEIGHBOUR_MB = 128  # stream/heavy footprint (MiB): over twice the H200's 60 MB L2
MAX_NEIGHBOUR_MB = 65536
DEFAULT_SPLIT_NEIGHBOURS = "light,heavy:128"  # what `probe split` measures the workload beside
