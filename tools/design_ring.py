"""Fit the generated ring's quadrupole and sextupole strengths so that its 6d
tunes and chromaticities are lattice.TARGET_Q / TARGET_DQ (Newton steps on
xtrack's twiss). Prints the constants to paste into kernel/lattice.py.

    python -m tools.design_ring
"""

import warnings

import numpy as np

from sharebench.kernel import lattice

warnings.simplefilter("ignore")


def evaluate(k):
    line = lattice.generate_ring(k1l=k[:2], k2l=k[2:])
    line.build_tracker()
    tw = line.twiss(method="6d")
    return np.array([tw.qx, tw.qy, tw.dqx, tw.dqy])


def main(iterations: int = 2):
    k = np.array([lattice.K1L_QF, lattice.K1L_QD, lattice.K2L_SF, lattice.K2L_SD])
    target = np.array([*lattice.TARGET_Q, *lattice.TARGET_DQ])
    f0 = evaluate(k)
    print("start", k.tolist(), f0)
    steps = [1e-5, 1e-5, 1e-3, 1e-3]
    jac = np.zeros((4, 4))
    for i in range(4):
        kk = k.copy()
        kk[i] += steps[i]
        jac[:, i] = (evaluate(kk) - f0) / steps[i]
    for _ in range(iterations):
        k = k + np.linalg.solve(jac, target - f0)
        f0 = evaluate(k)
        print("step", k.tolist(), f0)
    print(f"K1L_QF = {float(k[0])!r}\nK1L_QD = {float(k[1])!r}\nK2L_SF = {float(k[2])!r}\nK2L_SD = {float(k[3])!r}")


if __name__ == "__main__":
    main()
