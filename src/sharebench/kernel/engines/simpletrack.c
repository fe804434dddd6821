// Simpletrack-style tracking kernel: one work-item per particle, particle
// state in private memory for the whole run, loop over turns and elements
// read from one flat buffer of doubles.
//
// One source for every context: xobjects' source specialisation turns the
// gpukern, gpuglmem, gpufun and vectorize_over annotations into
// OpenCL C 1.2, CUDA or C with OpenMP. Portable on purpose: no
// generic-address-space pointers, no identifier named after a PoCL macro
// (PoCL #defines `length`), nothing beyond OpenCL C 1.2 plus cl_khr_fp64.
//
// The physics follows xtrack 0.118.4's C code operation by operation
// (drift.h, track_drift.h, multipole.h -> track_magnet.h / track_magnet_kick.h,
// cavity.h -> track_rf.h, xyshift.h, srotation.h, local_particle_common.h),
// for protons with chi = charge_ratio = 1, forward tracking, no radiation.
// Element layout in the buffer (all doubles); one Python class per element
// type packs, decodes and mirrors it in numpy (sharebench/kernel/elements/):
//   DRIFT_EXPANDED / DRIFT_EXACT : type, l
//   MULT_THIN                    : type, order, inv_factorial_order, l, hxl, knl[order+1], ksl[order+1]
//   MULT_THICK                   : type, order, inv_factorial_order, l, hxl, num_kicks, knl[..], ksl[..]
//   CAVITY                       : type, l, voltage, phase_const, omega_over_c, num_kicks
//   XYSHIFT                      : type, dx, dy
//   SROTATION                    : type, sin_z, cos_z

#pragma OPENCL EXTENSION cl_khr_fp64 : enable //only_for_context opencl
#include <math.h> //only_for_context cpu_serial cpu_openmp
#include <stdint.h> //only_for_context cpu_serial cpu_openmp
typedef int64_t st_int; //only_for_context cpu_serial cpu_openmp
typedef long st_int; //only_for_context opencl
typedef long long st_int; //only_for_context cuda

#define ST_DRIFT_EXPANDED 1
#define ST_DRIFT_EXACT 2
#define ST_MULT_THIN 3
#define ST_MULT_THICK 4
#define ST_CAVITY 5
#define ST_XYSHIFT 6
#define ST_SROTATION 7

// Expanded drift (xtrack: Drift_single_particle_expanded).
#define ST_DRIFT_EXP(DS) { \
    double const rv0v_ = 1. / rvv; \
    double const xp_ = px * rpp; \
    double const yp_ = py * rpp; \
    double const dzeta_ = 1 - rv0v_ * (1. + (xp_ * xp_ + yp_ * yp_) / 2.); \
    x = x + xp_ * (DS); \
    y = y + yp_ * (DS); \
    zeta = zeta + (DS) * dzeta_; \
}

// Exact drift (xtrack: Drift_single_particle_exact).
#define ST_DRIFT_EXA(DS) { \
    double const rv0v_ = 1. / rvv; \
    double const opd_ = 1. + delta; \
    double const opz_ = 1. / sqrt(opd_ * opd_ - px * px - py * py); \
    double const dzeta_ = 1 - rv0v_ * opd_ * opz_; \
    x = x + px * opz_ * (DS); \
    y = y + py * opz_ * (DS); \
    zeta = zeta + dzeta_ * (DS); \
}

// Multipole kick of weight W (xtrack: track_magnet_kick_single_particle with
// the kick-only or drift-kick-drift-expanded configuration, h = 0, k0..k3 = 0,
// empty knl_rel/ksl_rel, rot_frame = 1, no drift correction).
#define ST_MULT_KICK(W) { \
    st_int idx_ = order; \
    double inv_f_ = inv_factorial_order; \
    double dpx_mul_ = elems[p_knl + idx_] * inv_f_; \
    double dpy_mul_ = elems[p_ksl + idx_] * inv_f_; \
    while (idx_ > 0) { \
        double const zre_ = dpx_mul_ * x - dpy_mul_ * y; \
        double const zim_ = dpx_mul_ * y + dpy_mul_ * x; \
        inv_f_ *= idx_; \
        idx_ -= 1; \
        dpx_mul_ = elems[p_knl + idx_] * inv_f_ + zre_; \
        dpy_mul_ = elems[p_ksl + idx_] * inv_f_ + zim_; \
    } \
    px = px + (W) * (-dpx_mul_); \
    py = py + (W) * dpy_mul_; \
    if (hxl != 0.) { \
        double const hl_ = hxl * (W); \
        double dpx_ = hl_ * (1. + delta); \
        double const dzeta_ = -(1. / rvv) * hl_ * x; \
        double htot_ = 0.; \
        if (el_len != 0.) { htot_ = hxl / el_len; } \
        double const k0l_ = elems[p_knl]; \
        double const k1l_ = (order >= 1) ? elems[p_knl + 1] : 0.; \
        dpx_ = dpx_ + (-k0l_) * (W) * htot_ * x; \
        dpx_ = dpx_ + htot_ * k1l_ * (W) * (-x * x + 0.5 * y * y); \
        double const dpy_ = htot_ * k1l_ * (W) * x * y; \
        px = px + dpx_; \
        py = py + dpy_; \
        zeta = zeta + dzeta_; \
    } \
}

// Energy kick of a cavity, weight W (xtrack: track_rf_kick_single_particle
// + LocalParticle_add_to_energy(pz_only=1) + LocalParticle_update_pzeta).
#define ST_RF_KICK(W) { \
    double const tau_ = zeta / beta0; \
    double const energy_kick_ = q0 * (voltage * (W)) * sin(phase_const - omega_over_c * tau_); \
    pzeta = pzeta + energy_kick_ / (beta0 * p0c); \
    double const ptau_ = pzeta * beta0; \
    double const irpp_ = sqrt(ptau_ * ptau_ + 2.0 * pzeta + 1.0); \
    rpp = 1.0 / irpp_; \
    rvv = irpp_ / (1.0 + beta0 * ptau_); \
    delta = irpp_ - 1.0; \
}

/*gpukern*/ void simpletrack_track(
    /*gpuglmem*/ const double* elems,
    const st_int n_elements,
    /*gpuglmem*/ double* coords,
    /*gpuglmem*/ st_int* counters,
    const st_int npart,
    const st_int nturns,
    const double beta0,
    const double p0c,
    const double q0,
    const double xy_limit)
{
    #pragma omp parallel for schedule(dynamic, 16) //only_for_context cpu_openmp
    //vectorize_over ip npart
    if (ip < npart) {
        // private particle state for the whole run
        double x = coords[ip];
        double px = coords[npart + ip];
        double y = coords[2 * npart + ip];
        double py = coords[3 * npart + ip];
        double zeta = coords[4 * npart + ip];
        double delta = coords[5 * npart + ip];
        double rpp = coords[6 * npart + ip];
        double rvv = coords[7 * npart + ip];
        double pzeta = coords[8 * npart + ip];
        st_int state = counters[ip];
        st_int at_turn = counters[npart + ip];
        st_int at_element = counters[2 * npart + ip];

        for (st_int turn = 0; turn < nturns && state > 0; turn++) {
            st_int pos = 0;
            for (st_int iel = 0; iel < n_elements; iel++) {
                st_int const kind = (st_int) elems[pos];
                int check = 0;
                if (kind == ST_DRIFT_EXPANDED) {
                    double const ds = elems[pos + 1];
                    ST_DRIFT_EXP(ds)
                    pos += 2;
                    check = 1;
                }
                else if (kind == ST_MULT_THIN) {
                    st_int const order = (st_int) elems[pos + 1];
                    double const inv_factorial_order = elems[pos + 2];
                    double const el_len = elems[pos + 3];
                    double const hxl = elems[pos + 4];
                    st_int const p_knl = pos + 5;
                    st_int const p_ksl = p_knl + order + 1;
                    ST_MULT_KICK(1.)
                    pos = p_ksl + order + 1;
                }
                else if (kind == ST_XYSHIFT) {
                    x = x + (-elems[pos + 1]);
                    y = y + (-elems[pos + 2]);
                    pos += 3;
                }
                else if (kind == ST_SROTATION) {
                    double const sin_z = elems[pos + 1];
                    double const cos_z = elems[pos + 2];
                    double const x_hat = cos_z * x + sin_z * y;
                    double const y_hat = -sin_z * x + cos_z * y;
                    double const px_hat = cos_z * px + sin_z * py;
                    double const py_hat = -sin_z * px + cos_z * py;
                    x = x_hat;
                    y = y_hat;
                    px = px_hat;
                    py = py_hat;
                    pos += 3;
                }
                else if (kind == ST_CAVITY) {
                    double const el_len = elems[pos + 1];
                    double const voltage = elems[pos + 2];
                    double const phase_const = elems[pos + 3];
                    double const omega_over_c = elems[pos + 4];
                    st_int const nkicks = (st_int) elems[pos + 5];
                    double const w = 1. / nkicks;
                    for (st_int k = 0; k < nkicks; k++) {
                        double const ds = 0.5 * w * el_len;
                        if (ds != 0.) ST_DRIFT_EXP(ds)
                        ST_RF_KICK(w)
                        if (ds != 0.) ST_DRIFT_EXP(ds)
                    }
                    pos += 6;
                    check = 1;
                }
                else if (kind == ST_DRIFT_EXACT) {
                    double const ds = elems[pos + 1];
                    ST_DRIFT_EXA(ds)
                    pos += 2;
                    check = 1;
                }
                else if (kind == ST_MULT_THICK) {
                    st_int const order = (st_int) elems[pos + 1];
                    double const inv_factorial_order = elems[pos + 2];
                    double const el_len = elems[pos + 3];
                    double const hxl = elems[pos + 4];
                    st_int const nkicks = (st_int) elems[pos + 5];
                    st_int const p_knl = pos + 6;
                    st_int const p_ksl = p_knl + order + 1;
                    if (nkicks == 0) {
                        ST_DRIFT_EXP(el_len)
                    }
                    else {
                        double const w = 1. / nkicks;
                        for (st_int k = 0; k < nkicks; k++) {
                            double const ds = 0.5 * w * el_len;
                            if (ds != 0.) ST_DRIFT_EXP(ds)
                            ST_MULT_KICK(w)
                            if (ds != 0.) ST_DRIFT_EXP(ds)
                        }
                    }
                    pos = p_ksl + order + 1;
                }
                // xtrack's global aperture: checked after statically thick
                // elements (Drift, Cavity); NaN coordinates fail it too.
                if (check && !(x >= -xy_limit && x <= xy_limit
                               && y >= -xy_limit && y <= xy_limit)) {
                    state = -1;
                    at_element = iel;
                    break;
                }
            }
            if (state > 0) {
                at_turn += 1;
                at_element = 0;
            }
        }

        coords[ip] = x;
        coords[npart + ip] = px;
        coords[2 * npart + ip] = y;
        coords[3 * npart + ip] = py;
        coords[4 * npart + ip] = zeta;
        coords[5 * npart + ip] = delta;
        coords[6 * npart + ip] = rpp;
        coords[7 * npart + ip] = rvv;
        coords[8 * npart + ip] = pzeta;
        counters[ip] = state;
        counters[npart + ip] = at_turn;
        counters[2 * npart + ip] = at_element;
    }
    //end_vectorize
}
