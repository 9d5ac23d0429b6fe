//! Delete p columns at k0 (spec §1.8; S0 §2.4.2, §4.2; S2 §3.2). After shifting R's
//! columns, reflectors of length p+1 clear the p sub-diagonals; blocks of n_b of them
//! have V/T (W/Y) of p + n_b rows (erratum E13) and touch only the trailing columns, d and
//! (when held) Q's columns. Cost O((n−k0−p)²·p), independent of m (plus O(m·p·(n−k0−p))
//! for Q). Fast path k0 = n−p: truncation only. Q optional. Errata E4, E13 fixed.
#![forbid(unsafe_code)]

use crate::cpu::householder::{apply_left_split, house};
use crate::cpu::wy::{larfb_left, larfb_right, larft, resolve_block_size};
use crate::cpu::{check_rank_of, CpuQr, Dims};
use crate::error::{Error, Result};
use crate::mat::Mat;
use crate::scalar::Scalar;

const OP: &str = "delete_cols";

/// A validated column deletion (spec §1.8): what both backends execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// First deleted column (0-based).
    pub k0: usize,
    /// Number of deleted columns.
    pub p: usize,
    /// Columns after the update, n − p ≥ 1.
    pub n_new: usize,
}

impl Plan {
    /// True when the deleted block is the right-most one (k0 = n − p): R is only
    /// truncated, d and Q do not change.
    pub fn is_truncation(&self) -> bool {
        self.k0 == self.n_new
    }
}

/// Validates deleting columns k0..k0+p of an m×n state (spec §1.8, §0.2: k0 ∈ [0, n−p]).
/// Pure; Q is not required.
///
/// # Errors
/// [`Error::EmptyBlock`] (p = 0), [`Error::OutOfRange`] (k0 + p > n), and
/// [`Error::InvalidParam`] (`p`) when p = n: a factorisation with no columns is
/// meaningless, so at least one column must remain.
pub(crate) fn plan(dims: Dims, k0: usize, p: usize) -> Result<Plan> {
    if p == 0 {
        return Err(Error::EmptyBlock { op: OP });
    }
    if k0.checked_add(p).is_none_or(|end| end > dims.n) {
        return Err(Error::OutOfRange {
            op: OP,
            k0,
            p,
            n: dims.n,
        });
    }
    if dims.n == p {
        return Err(Error::InvalidParam {
            op: OP,
            what: "p",
            why: format!("deleting all {p} columns would leave an empty factorisation"),
        });
    }
    Ok(Plan {
        k0,
        p,
        n_new: dims.n - p,
    })
}

/// Deletes columns k0..k0+p of A, updating R (m×(n−p)), d and, when held, Q
/// (spec §1.8). R's strictly lower part stays exactly 0.
///
/// # Errors
/// The errors of `plan`; [`Error::InvalidParam`] for a block size of 0 in the state's
/// params; [`Error::RankDeficient`] if the updated R fails the state's rank test. On
/// any error the state is unchanged (the result is computed in new buffers first).
///
/// # Examples
/// ```
/// use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate};
/// let a = Mat::<f64>::from_fn(7, 4, |i, j| ((2 * i + 3 * j) % 5) as f64 + (i == j) as u8 as f64);
/// let b = Mat::<f64>::from_fn(7, 1, |i, _| i as f64);
/// let mut st = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::None, FactorParams::default()).unwrap();
/// st.delete_cols(1, 2).unwrap();
/// assert_eq!((st.nrows(), st.ncols()), (7, 2));
/// ```
pub fn run_cpu<T: Scalar>(st: &mut CpuQr<T>, k0: usize, p: usize) -> Result<()> {
    let plan = plan(st.dims, k0, p)?;
    let nn = plan.n_new;
    let nb = resolve_block_size(OP, st.params.block_size, nn - k0)?;
    let m = st.dims.m;
    let mut r = Mat::from_fn(m, nn, |i, j| {
        if j < k0 {
            st.r[(i, j)]
        } else {
            st.r[(i, j + p)]
        }
    });
    if plan.is_truncation() {
        check_rank_of(&r, nn, st.rank_tol)?;
        st.r = r;
        st.dims.n = nn;
        return Ok(());
    }
    let mut d = st.d.clone();
    let mut q = st.q.clone();
    let mut c0 = k0;
    while c0 < nn {
        let jb = nb.min(nn - c0);
        let l = p + jb; // rows c0..c0+p+jb (E13)
        let mut v = Mat::<T>::zeros(l, jb);
        let mut tau = Vec::with_capacity(jb);
        // Panel: reflector c acts on rows c..=c+p; c+p ≤ n−1 < m.
        for c in c0..c0 + jb {
            let i = c - c0;
            let (head, tail) = r.col_mut(c)[c..c + p + 1]
                .split_first_mut()
                .expect("p + 1 ≥ 1 rows");
            let (beta, t) = house(*head, tail);
            *head = beta;
            let vi = v.col_mut(i);
            vi[i] = T::ONE;
            vi[i + 1..i + 1 + p].copy_from_slice(tail);
            tail.fill(T::ZERO);
            tau.push(t);
            for cc in c + 1..c0 + jb {
                let (h, tl) = r.col_mut(cc)[c..c + p + 1]
                    .split_first_mut()
                    .expect("p + 1 ≥ 1 rows");
                apply_left_split(&v.col(i)[i + 1..i + 1 + p], t, h, tl);
            }
        }
        let t = larft(&v, &tau);
        // Only rows c0..c0+p+jb of the trailing columns, of d and columns of Q change.
        larfb_left(&v, &t, true, &mut r, c0, c0 + jb..nn);
        larfb_left(&v, &t, true, &mut d, c0, 0..st.dims.q);
        if let Some(qm) = q.as_mut() {
            larfb_right(&v, &t, qm, c0);
        }
        c0 += jb;
    }
    check_rank_of(&r, nn, st.rank_tol)?;
    st.r = r;
    st.d = d;
    st.q = q;
    st.dims.n = nn;
    Ok(())
}

/// GPU path of [`run_cpu`] (spec §1.8, erratum E13): validates with the same `plan`,
/// moves the kept columns into a new R with two device-to-device copies (with the
/// padded ld, columns k0+p..n are contiguous), then runs the banded blocked reflectors
/// (length p+1, blocks of p+n_b rows) on copies of d and Q. A state without Q whose
/// band fits the device (p ≤ 256, every block of columns resident) takes one
/// cooperative launch instead (`row_insert_band_qr`: the reflectors one at a time, as
/// the unblocked algorithm; the block size does not apply). The state is swapped in
/// only after the rank check passes.
///
/// Fast path k0 = n−p: R's first n−p columns are kept **in place**
/// (`DevMat::truncate_cols`: no allocation, no copy, no launch,
/// no synchronisation; issue 7) and there is no rank check: the kept columns and
/// their diagonal are unchanged and ‖R‖_F can only shrink, so a state that passed
/// its rank test (every GPU state did, at its own tolerance: factorisation and every
/// update check it) still passes it. The CPU path keeps its (cheap) check.
///
/// # Errors
/// As [`run_cpu`], plus [`Error::OutOfMemory`] and device errors.
pub fn run_gpu<T: crate::gpu::GpuScalar>(
    st: &mut crate::gpu::GpuQr<T>,
    k0: usize,
    p: usize,
) -> Result<()> {
    run_gpu_path(st, k0, p, true)
}

/// [`run_gpu`] with the one-launch band (`row_insert_band_qr`, states without Q)
/// allowed or not (tests compare the two paths).
pub(crate) fn run_gpu_path<T: crate::gpu::GpuScalar>(
    st: &mut crate::gpu::GpuQr<T>,
    k0: usize,
    p: usize,
    one_launch: bool,
) -> Result<()> {
    use crate::gpu::householder::{blocked_qr_band, check_rank_dev, dup_mat};
    use crate::gpu::DevMat;
    let plan = plan(st.dims, k0, p)?;
    let nn = plan.n_new;
    let nb = resolve_block_size(OP, st.params.block_size, nn - k0)?;
    if plan.is_truncation() {
        st.r.truncate_cols(nn);
        st.dims.n = nn;
        return Ok(());
    }
    let gpu = st.gpu.clone();
    let (m, n) = (st.dims.m, st.dims.n);
    let ld = st.r.ld();
    let mut r = DevMat::<T>::zeros(&gpu, m, nn)?;
    debug_assert_eq!(r.ld(), ld);
    for (src, dst) in [
        (0..k0 * ld, 0..k0 * ld),
        ((k0 + p) * ld..n * ld, k0 * ld..nn * ld),
    ] {
        if src.is_empty() {
            continue;
        }
        gpu.count_launch();
        gpu.stream()
            .memcpy_dtod(&st.r.buf().slice(src), &mut r.buf_mut().slice_mut(dst))
            .map_err(crate::gpu::driver_err("delete_cols: moving R's columns"))?;
    }
    let mut d = dup_mat(&gpu, &st.d)?;
    let mut q = st.q.as_ref().map(|qm| dup_mat(&gpu, qm)).transpose()?;
    gpu.stage_mark("copies");
    // Without Q, the band's reflectors are needed by nothing after the re-triangularisation,
    // so they run as one chain in one launch (`row_insert_band_qr`, unblocked: n_b does not
    // apply) where the columns fit the device, as row insertion does (spec §1.8, §1.9).
    let one_launch = match (&q, one_launch) {
        (None, true) => gpu.band_qr_plan::<T>(nn - k0, st.dims.q, p)?,
        _ => None,
    };
    match one_launch {
        Some(shape) => {
            let mut v = DevMat::<T>::zeros(&gpu, p, nn - k0)?;
            gpu.row_insert_band_qr(&mut r, k0, k0, &mut d, nn - k0, p, &mut v, shape)?;
            gpu.stage_mark("band QR, one launch");
        }
        None => {
            blocked_qr_band(
                &gpu,
                &mut r,
                k0..n,
                k0..nn,
                Some(p),
                Some(&mut d),
                q.as_mut(),
                nb,
                None,
            )?;
            gpu.stage_mark("band QR");
        }
    }
    check_rank_dev(&gpu, &r, nn, st.rank_tol)?;
    gpu.stage_mark("rank check");
    st.r = r;
    st.d = d;
    st.q = q;
    st.dims.n = nn;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::QrUpdate;
    use crate::params::{FactorParams, QPolicy, UpdateParams};
    use crate::qr::factorize::tests::{check_against_refactor, rand_mat};
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn dims(n: usize) -> Dims {
        Dims {
            m: 40,
            n,
            q: 1,
            policy: QPolicy::None,
        }
    }

    #[test]
    fn plan_cases() {
        assert!(matches!(plan(dims(5), 2, 0), Err(Error::EmptyBlock { .. })));
        assert!(matches!(
            plan(dims(5), 3, 3),
            Err(Error::OutOfRange {
                k0: 3,
                p: 3,
                n: 5,
                ..
            })
        ));
        assert!(matches!(plan(dims(5), 0, 6), Err(Error::OutOfRange { .. })));
        assert!(matches!(
            plan(dims(5), usize::MAX, 2),
            Err(Error::OutOfRange { .. })
        ));
        assert!(matches!(
            plan(dims(5), 0, 5),
            Err(Error::InvalidParam { what: "p", .. })
        ));
        let pl = plan(dims(5), 3, 2).unwrap();
        assert!(pl.is_truncation() && pl.n_new == 3);
        assert!(!plan(dims(5), 0, 2).unwrap().is_truncation());
    }

    fn run_case<T: Scalar>(seed: u64, m: usize, n: usize, k0: usize, p: usize, nb: Option<usize>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let a = rand_mat::<T>(&mut rng, m, n);
        let b = rand_mat::<T>(&mut rng, m, 2);
        let a_new = Mat::from_fn(
            m,
            n - p,
            |i, j| if j < k0 { a[(i, j)] } else { a[(i, j + p)] },
        );
        for policy in [QPolicy::Full, QPolicy::None] {
            let mut st =
                CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default()).unwrap();
            st.set_params(UpdateParams {
                block_size: nb,
                ..UpdateParams::default()
            });
            st.delete_cols(k0, p).unwrap();
            assert_eq!(st.ncols(), n - p);
            check_against_refactor(&st, &a_new, &b);
        }
    }

    #[test]
    fn delete_cols_matches_refactor_f64() {
        for &(m, n, k0, p, nb) in &[
            (33usize, 31usize, 0usize, 1usize, None),
            (33, 31, 15, 1, Some(4)),
            (33, 31, 30, 1, None),
            (127, 61, 0, 7, Some(5)),
            (127, 61, 20, 13, Some(100)),
            (127, 61, 54, 7, None),
            (257, 127, 3, 33, Some(17)),
            (45, 3, 1, 2, None),
            (31, 2, 0, 1, Some(1)),
        ] {
            run_case::<f64>(m as u64 + 31 * k0 as u64 + p as u64, m, n, k0, p, nb);
        }
    }

    #[test]
    fn delete_cols_matches_refactor_f32() {
        for &(m, n, k0, p, nb) in &[
            (33usize, 31usize, 0usize, 1usize, None),
            (127, 61, 30, 5, Some(3)),
            (127, 61, 56, 5, None),
            (257, 33, 0, 31, Some(64)),
        ] {
            run_case::<f32>(7 * m as u64 + k0 as u64 + p as u64, m, n, k0, p, nb);
        }
    }

    #[test]
    fn errors_leave_state_unchanged() {
        let mut rng = StdRng::seed_from_u64(42);
        let a = rand_mat::<f64>(&mut rng, 37, 11);
        let b = rand_mat::<f64>(&mut rng, 37, 2);
        let mut st = CpuQr::factorize(
            a.as_ref(),
            b.as_ref(),
            QPolicy::Full,
            FactorParams::default(),
        )
        .unwrap();
        let snap = st.clone();
        let same =
            |s: &CpuQr<f64>| s.r == snap.r && s.d == snap.d && s.q == snap.q && s.dims == snap.dims;
        assert!(matches!(
            st.delete_cols(3, 0),
            Err(Error::EmptyBlock { .. })
        ));
        assert!(same(&st));
        assert!(matches!(
            st.delete_cols(8, 4),
            Err(Error::OutOfRange { .. })
        ));
        assert!(same(&st));
        assert!(matches!(
            st.delete_cols(0, 11),
            Err(Error::InvalidParam { .. })
        ));
        assert!(same(&st));
        st.params.block_size = Some(0);
        assert!(matches!(
            st.delete_cols(2, 3),
            Err(Error::InvalidParam { .. })
        ));
        assert!(same(&st));
        st.params.block_size = None;
        // A rank test that the result cannot pass: the failure is detected after the
        // update is computed, and nothing is written.
        st.rank_tol = 0.9;
        for k0 in [2, 8] {
            assert!(matches!(
                st.delete_cols(k0, 3),
                Err(Error::RankDeficient { .. })
            ));
            assert!(same(&st));
        }
    }
}

/// The one-launch band (`row_insert_band_qr`) against the CPU update and the blocked GPU
/// path, on the GPU (skips without one).
#[cfg(test)]
mod gpu_tests {
    use super::*;
    use crate::backend::QrUpdate;
    use crate::gpu::{GpuQr, GpuScalar};
    use crate::params::{FactorParams, QPolicy, UpdateParams};
    use crate::qr::factorize::tests::{lower_is_zero, rand_mat, rel_diff};
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use std::sync::Arc;

    #[allow(clippy::too_many_arguments)]
    fn case<T: GpuScalar>(
        g: &Arc<crate::gpu::Gpu>,
        seed: u64,
        m: usize,
        n: usize,
        q: usize,
        k0: usize,
        p: usize,
        nb: Option<usize>,
    ) {
        let what = format!(
            "{} m={m} n={n} q={q} k0={k0} p={p} nb={nb:?}",
            core::any::type_name::<T>()
        );
        let mut rng = StdRng::seed_from_u64(seed);
        let a = rand_mat::<T>(&mut rng, m, n);
        let b = rand_mat::<T>(&mut rng, m, q);
        assert!(
            g.band_qr_plan::<T>(n - p - k0, q, p).unwrap().is_some(),
            "{what}: the one-launch path must apply"
        );
        let params = FactorParams::default();
        let up = UpdateParams {
            block_size: nb,
            ..UpdateParams::default()
        };
        let mut cs = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::None, params).unwrap();
        cs.set_params(up);
        cs.delete_cols(k0, p).unwrap();
        let tol = 10.0 * m as f64 * T::UNIT_ROUNDOFF;
        for one_launch in [true, false] {
            let mut gs =
                GpuQr::factorize(g, a.as_ref(), b.as_ref(), QPolicy::None, params).unwrap();
            gs.set_params(up);
            let launches = g.launch_count();
            run_gpu_path(&mut gs, k0, p, one_launch).unwrap();
            if one_launch {
                // Two column moves, d's copy, the scratch V and the band: no per-panel
                // launches (the rank check adds a fixed few).
                let used = g.launch_count() - launches;
                assert!(used <= 20, "{what}: {used} launches on the one-launch path");
            }
            assert_eq!(gs.dims.n, n - p, "{what}");
            let (r, d) = (gs.r.to_host(g).unwrap(), gs.d.to_host(g).unwrap());
            assert!(
                lower_is_zero(&r),
                "{what} one_launch={one_launch}: R not upper triangular"
            );
            let er = rel_diff(&r, &cs.r);
            assert!(
                er <= tol,
                "{what} one_launch={one_launch}: R differs from the CPU by {er:.2e} > {tol:.2e}"
            );
            let ed = rel_diff(&d, &cs.d);
            assert!(
                ed <= tol,
                "{what} one_launch={one_launch}: d differs from the CPU by {ed:.2e} > {tol:.2e}"
            );
        }
    }

    fn sweep<T: GpuScalar>(g: &Arc<crate::gpu::Gpu>) {
        // (m, n, q, k0, p, nb): one band column, p = 1, p < 32, p = 33 (two elements a
        // lane), the seeds' BS shape scaled down (1000 band columns, p = 200, n_b 1 and
        // 10), p = 256; n + q not multiples of 32; several blocks.
        for (i, &(m, n, q, k0, p, nb)) in [
            (9, 6, 1, 2, 3, None),
            (45, 31, 2, 0, 1, Some(1)),
            (130, 97, 1, 40, 20, Some(10)),
            (301, 260, 3, 17, 33, None),
            (1300, 1200, 1, 0, 200, Some(1)),
            (1250, 1203, 2, 103, 200, Some(10)),
            (700, 600, 1, 250, 256, None),
        ]
        .iter()
        .enumerate()
        {
            case::<T>(g, 90 + i as u64, m, n, q, k0, p, nb);
        }
    }

    #[test]
    fn one_launch_band_matches_cpu_and_blocked_f64() {
        let Some(g) = crate::gpu::householder::tests_gate() else {
            return;
        };
        sweep::<f64>(&Arc::new(g));
    }

    #[test]
    fn one_launch_band_matches_cpu_and_blocked_f32() {
        let Some(g) = crate::gpu::householder::tests_gate() else {
            return;
        };
        sweep::<f32>(&Arc::new(g));
    }

    #[test]
    fn bands_wider_than_256_take_the_blocked_path() {
        let Some(g) = crate::gpu::householder::tests_gate() else {
            return;
        };
        assert_eq!(g.band_qr_plan::<f64>(100, 1, 257).unwrap(), None);
        // States with Q keep the blocked path whatever the band (checked by the update
        // tests against the CPU with Q).
        let mut rng = StdRng::seed_from_u64(5);
        let a = rand_mat::<f64>(&mut rng, 400, 300);
        let b = rand_mat::<f64>(&mut rng, 400, 1);
        let g = Arc::new(g);
        let mut gs = GpuQr::factorize(
            &g,
            a.as_ref(),
            b.as_ref(),
            QPolicy::None,
            FactorParams::default(),
        )
        .unwrap();
        let mut cs = CpuQr::factorize(
            a.as_ref(),
            b.as_ref(),
            QPolicy::None,
            FactorParams::default(),
        )
        .unwrap();
        gs.delete_cols(10, 270).unwrap();
        cs.delete_cols(10, 270).unwrap();
        let r = gs.r.to_host(&g).unwrap();
        assert!(lower_is_zero(&r));
        assert!(rel_diff(&r, &cs.r) <= 10.0 * 400.0 * f64::EPSILON / 2.0);
    }
}
