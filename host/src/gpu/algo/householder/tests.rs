//! GPU tests of the blocked Householder QR and its panels (they skip without a GPU).

#[allow(unused_imports)]
use super::*;

mod unit {
    //! The one-launch panel against the per-column reference path and against the
    //! factorisation identities (docs/algorithms.md#accuracy-measures): exact zeros below R's
    //! diagonal, ‖RᵀR − AᵀA‖_F ≤ 10·m·u·‖A‖²_F, and with Q kept ‖QR − A‖_F ≤ 10·m·u·‖A‖_F,
    //! ‖QᵀQ − I‖_F ≤ 10·m·u, d = Qᵀb. Runs on a GPU; without one it prints that it
    //! skipped (a failure with `CUQR_REQUIRE_GPU=1`).
    use super::*;
    use crate::{Mat, Scalar};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn gpu() -> Option<Gpu> {
        crate::gpu::algo::householder::tests_gate()
    }

    /// Entries of magnitude in [0.1, 1) with random signs, zero below `band` (if any).
    fn rand_mat<T: Scalar>(seed: u64, m: usize, n: usize, band: Option<usize>) -> Mat<T> {
        let mut rng = StdRng::seed_from_u64(seed);
        Mat::from_fn(m, n, |i, j| {
            let x: f64 = rng.random_range(0.1..1.0);
            let x = if rng.random_bool(0.5) { x } else { -x };
            match band {
                Some(b) if i > j + b => T::ZERO,
                _ => T::from_f64(x),
            }
        })
    }

    fn to64<T: Scalar>(a: &Mat<T>) -> Mat<f64> {
        Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64())
    }

    struct Out {
        r: Mat<f64>,
        d: Mat<f64>,
        q: Option<Mat<f64>>,
    }

    /// The default panels with the merged trailing update, A[0..m, 0..n] in blocks of nb.
    fn merged_params(m: usize, n: usize, nb: usize) -> BlockedQrParams {
        BlockedQrParams {
            merge_trailing: true,
            ..BlockedQrParams::new(0..m, 0..n, nb)
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn factor<T: GpuScalar>(
        g: &Gpu,
        a: &Mat<T>,
        b: &Mat<T>,
        band: Option<usize>,
        nb: usize,
        with_q: bool,
        panel: PanelImpl,
    ) -> Out {
        let m = a.nrows();
        let mut da = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut dd = DevMat::from_host(g, b.as_ref()).unwrap();
        let mut dq = if with_q {
            let mut q = DevMat::<T>::zeros(g, m, m).unwrap();
            g.panel_set_identity(&mut q.view_mut()).unwrap();
            Some(q)
        } else {
            None
        };
        let n = a.ncols();
        let params = BlockedQrParams {
            band,
            panel,
            merge_trailing: true,
            ..BlockedQrParams::new(0..m, 0..n, nb)
        };
        let outputs = QrOutputs {
            d: Some(&mut dd),
            q: dq.as_mut(),
            ..QrOutputs::default()
        };
        blocked_qr_with(g, &mut da, outputs, &params).unwrap();
        Out {
            r: to64(&da.to_host(g).unwrap()),
            d: to64(&dd.to_host(g).unwrap()),
            q: dq.map(|q| to64(&q.to_host(g).unwrap())),
        }
    }

    fn check<T: GpuScalar>(
        g: &Gpu,
        seed: u64,
        (m, n): (usize, usize),
        band: Option<usize>,
        nb: usize,
        with_q: bool,
        panel: PanelImpl,
    ) {
        let a = rand_mat::<T>(seed, m, n, band);
        let b = rand_mat::<T>(seed + 1, m, 2, None);
        let (a64, b64) = (to64(&a), to64(&b));
        let tol = 10.0 * m as f64 * T::UNIT_ROUNDOFF;
        let what = format!("{m}x{n} {} nb {nb} band {band:?} {panel:?}", T::NAME);
        let out = factor(g, &a, &b, band, nb, with_q, panel);
        let refp = factor(g, &a, &b, band, nb, false, PanelImpl::PerColumn);
        for j in 0..n {
            for i in j + 1..m {
                assert!(
                    out.r[(i, j)] == 0.0,
                    "{what}: R({i},{j}) = {} ≠ 0",
                    out.r[(i, j)]
                );
            }
        }
        let na = a64.norm_fro();
        let r = Mat::from_fn(n, n, |i, j| out.r[(i, j)]);
        let mut gram = r.transpose().matmul(&r);
        let ata = a64.transpose().matmul(&a64);
        for j in 0..n {
            for i in 0..n {
                gram[(i, j)] -= ata[(i, j)];
            }
        }
        let e_gram = gram.norm_fro() / (na * na);
        assert!(
            e_gram <= tol,
            "{what}: ‖RᵀR − AᵀA‖/‖A‖² = {e_gram:e} > {tol:e}"
        );
        let mut diff = out.r.clone();
        for j in 0..n {
            for i in 0..m {
                diff[(i, j)] -= refp.r[(i, j)];
            }
        }
        let e_ref = diff.norm_fro() / na;
        assert!(
            e_ref <= 10.0 * tol,
            "{what}: ‖R_fused − R_per-column‖/‖A‖ = {e_ref:e} > {:e}",
            10.0 * tol
        );
        if let Some(q) = &out.q {
            let mut qr = q.matmul(&out.r);
            for j in 0..n {
                for i in 0..m {
                    qr[(i, j)] -= a64[(i, j)];
                }
            }
            let e_a = qr.norm_fro() / na;
            assert!(e_a <= tol, "{what}: ‖QR − A‖/‖A‖ = {e_a:e} > {tol:e}");
            let mut qtq = q.transpose().matmul(q);
            for i in 0..m {
                qtq[(i, i)] -= 1.0;
            }
            let e_q = qtq.norm_fro();
            assert!(e_q <= tol, "{what}: ‖QᵀQ − I‖ = {e_q:e} > {tol:e}");
            let mut qtb = q.transpose().matmul(&b64);
            for j in 0..2 {
                for i in 0..m {
                    qtb[(i, j)] -= out.d[(i, j)];
                }
            }
            let e_d = qtb.norm_fro() / b64.norm_fro();
            assert!(e_d <= tol, "{what}: ‖d − Qᵀb‖/‖b‖ = {e_d:e} > {tol:e}");
        }
    }

    fn cases<T: GpuScalar>(g: &Gpu) {
        use PanelImpl::{Auto, FusedInPlace};
        check::<T>(g, 1, (300, 200), None, 32, true, Auto);
        check::<T>(g, 2, (97, 97), None, 16, true, Auto);
        check::<T>(g, 3, (33, 33), None, 64, true, Auto);
        check::<T>(g, 4, (70, 45), None, 1, true, Auto);
        check::<T>(g, 5, (700, 130), None, 64, true, FusedInPlace);
        check::<T>(g, 6, (501, 77), None, 24, true, FusedInPlace);
        check::<T>(g, 7, (400, 120), Some(9), 32, true, Auto);
        check::<T>(g, 8, (400, 120), Some(9), 32, false, FusedInPlace);
        check::<T>(g, 9, (6007, 70), None, 64, false, Auto);
        check::<T>(g, 10, (6007, 41), None, 32, false, FusedInPlace);
        check::<T>(g, 11, (20011, 33), None, 33, false, Auto);
        check::<T>(g, 12, (300, 200), None, 32, true, PanelImpl::FusedInOrder);
        check::<T>(
            g,
            13,
            (400, 120),
            Some(9),
            32,
            true,
            PanelImpl::FusedInOrder,
        );
        // TSQR panels (32 columns, the last narrower), with and without Q; a band
        // falls back to the fused panel.
        check::<T>(g, 14, (300, 200), None, 32, true, PanelImpl::Tsqr);
        check::<T>(g, 15, (6007, 70), None, 64, false, PanelImpl::Tsqr);
        check::<T>(g, 16, (1000, 45), None, 64, true, PanelImpl::Tsqr);
        check::<T>(g, 17, (20011, 33), None, 33, false, PanelImpl::Tsqr);
        check::<T>(g, 18, (400, 120), Some(9), 32, true, PanelImpl::Tsqr);
        // Block sizes wider than the one-launch panel: sub-panels of ≤ 64 columns whose
        // reflectors merge into n_b-wide blocks (100 = 50 + 50, 200 = 4·50, 130 = 3·44;
        // the last block narrower), and banded ones applied a sub-panel at a time;
        // against the per-column panel with the same n_b.
        check::<T>(g, 22, (700, 300), None, 100, true, Auto);
        check::<T>(g, 23, (900, 470), None, 200, true, Auto);
        check::<T>(g, 24, (5000, 330), None, 130, false, Auto);
        check::<T>(g, 25, (600, 250), Some(9), 100, true, Auto);
        check::<T>(g, 26, (800, 300), None, 256, false, Auto);
        // Block sizes under the one-launch panel are grouped into panels of
        // ⌊64/n_b⌋·n_b columns (10 → 60, 7 → 63, 1 → 64), with and without Q; against
        // the per-column panel taking n_b-wide blocks.
        check::<T>(g, 27, (611, 301), None, 10, true, Auto);
        check::<T>(g, 28, (523, 211), None, 7, false, Auto);
        check::<T>(g, 29, (450, 199), None, 1, true, Auto);
    }

    /// A panel too tall for the slab variant takes the TSQR panel by itself (Auto).
    #[test]
    fn tall_panels_take_tsqr() {
        if let Some(g) = gpu() {
            check::<f64>(&g, 19, (300_007, 40), None, 64, false, PanelImpl::Auto);
            check::<f32>(&g, 20, (300_007, 40), None, 64, false, PanelImpl::Auto);
        }
    }

    /// A tall enough f32 factorisation that panel 0's trailing update (8 columns) and
    /// both panels' d update (2 columns) take W = VᵀC from `ts_gemm` (137 chunks of 4096
    /// rows): R against AᵀA and against the per-column panels, as `check`.
    #[test]
    fn tall_f32_trailing_takes_the_chunked_product() {
        assert!(ts_gemm_pays::<f32>(557_057, 8) && ts_gemm_pays::<f32>(557_025, 2));
        assert!(!ts_gemm_pays::<f64>(557_057, 8), "f64 keeps cuBLAS");
        assert!(!ts_gemm_pays::<f32>(557_057, 1), "one column is a GEMV");
        assert!(
            !ts_gemm_pays::<f32>(300_007, 8),
            "too few chunks to fill the GPU"
        );
        if let Some(g) = gpu() {
            check::<f32>(&g, 21, (557_057, 40), None, 64, false, PanelImpl::Auto);
        }
    }

    /// Look-ahead (panel i+1 on stream 2 during panel i's trailing update) against
    /// every panel in order on the main stream: the same arithmetic, so R, d and Q
    /// agree to m·u (the trailing GEMMs are split into two column ranges, which cuBLAS
    /// may round differently).
    fn lookahead_case<T: GpuScalar>(g: &Gpu, seed: u64, (m, n): (usize, usize), nb: usize) {
        let a = rand_mat::<T>(seed, m, n, None);
        let b = rand_mat::<T>(seed + 1, m, 2, None);
        let na = to64(&a).norm_fro();
        let nbn = to64(&b).norm_fro();
        let tol = m as f64 * T::UNIT_ROUNDOFF;
        let what = format!("{m}x{n} {} nb {nb}", T::NAME);
        for with_q in [false, true] {
            let la = factor(g, &a, &b, None, nb, with_q, PanelImpl::Auto);
            let io = factor(g, &a, &b, None, nb, with_q, PanelImpl::FusedInOrder);
            let diff = |x: &Mat<f64>, y: &Mat<f64>| {
                Mat::from_fn(x.nrows(), x.ncols(), |i, j| x[(i, j)] - y[(i, j)]).norm_fro()
            };
            let e_r = diff(&la.r, &io.r) / na;
            assert!(
                e_r <= tol,
                "{what} Q {with_q}: ‖R_la − R_in-order‖/‖A‖ = {e_r:e}"
            );
            let e_d = diff(&la.d, &io.d) / nbn;
            assert!(
                e_d <= tol,
                "{what} Q {with_q}: ‖d_la − d_in-order‖/‖b‖ = {e_d:e}"
            );
            if let (Some(q1), Some(q2)) = (&la.q, &io.q) {
                let e_q = diff(q1, q2) / (m as f64).sqrt();
                assert!(e_q <= tol, "{what}: ‖Q_la − Q_in-order‖/√m = {e_q:e}");
            }
        }
    }

    #[test]
    fn lookahead_matches_in_order_panels() {
        if let Some(g) = gpu() {
            for (i, &(m, n, nb)) in [(1000, 700, 64), (2001, 333, 48), (129, 129, 8)]
                .iter()
                .enumerate()
            {
                lookahead_case::<f64>(&g, 40 + i as u64, (m, n), nb);
                lookahead_case::<f32>(&g, 50 + i as u64, (m, n), nb);
            }
        }
    }

    #[test]
    fn merge_groups_take_consecutive_full_height_blocks() {
        let m = 1000;
        // five 64-column panels from row 0, then a 40-column one
        let s = [
            (0, 1000, 64),
            (64, 936, 64),
            (128, 872, 64),
            (192, 808, 64),
            (256, 744, 64),
            (320, 680, 40),
        ];
        assert_eq!(merge_groups(&s, m, 256), vec![0..4, 4..6]);
        assert_eq!(merge_groups(&s, m, 128), vec![0..2, 2..4, 4..6]);
        let single: Vec<Range<usize>> = (0..6).map(|i| i..i + 1).collect();
        assert_eq!(merge_groups(&s, m, 0), single);
        // a banded block (fewer rows) or a gap between blocks ends a run
        let t = [(0, 1000, 32), (32, 100, 32), (64, 936, 32), (100, 900, 32)];
        assert_eq!(merge_groups(&t, m, 256), vec![0..1, 1..2, 2..3, 3..4]);
        // a block wider than the limit stands alone
        assert_eq!(
            merge_groups(&[(0, 1000, 300), (300, 700, 8)], m, 256),
            vec![0..1, 1..2]
        );
        assert!(merge_groups(&[], m, 256).is_empty());
    }

    /// Q accumulated from merged block reflectors equals Q from one block at a time
    /// within m·u (‖ΔQ‖_F/√m), and is orthogonal to 10·m·u.
    fn merged_q_case<T: GpuScalar>(g: &Gpu, seed: u64, (m, n): (usize, usize), nb: usize) {
        let a = rand_mat::<T>(seed, m, n, None);
        let mut da = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut blocks = Vec::new();
        blocked_qr_band(
            g,
            &mut da,
            0..m,
            0..n,
            None,
            None,
            None,
            nb,
            Some(&mut blocks),
        )
        .unwrap();
        let q_of = |width: usize| -> Mat<f64> {
            let mut q = DevMat::<T>::zeros(g, m, m).unwrap();
            accumulate_q_merged(g, &blocks, &mut q, width).unwrap();
            to64(&q.to_host(g).unwrap())
        };
        let q0 = q_of(0);
        let tol = m as f64 * T::UNIT_ROUNDOFF;
        for width in [128, Q_MERGE_WIDTH, 1 << 20] {
            let qw = q_of(width);
            let e =
                Mat::from_fn(m, m, |i, j| qw[(i, j)] - q0[(i, j)]).norm_fro() / (m as f64).sqrt();
            assert!(
                e <= tol,
                "{m}x{n} {} nb {nb} width {width}: ‖ΔQ‖/√m = {e:e}",
                T::NAME
            );
            let mut orth = 0.0f64;
            for i in 0..m {
                for j in 0..m {
                    let dot: f64 = (0..m).map(|k| qw[(k, i)] * qw[(k, j)]).sum();
                    let d = dot - if i == j { 1.0 } else { 0.0 };
                    orth += d * d;
                }
            }
            assert!(
                orth.sqrt() <= 10.0 * tol,
                "{m}x{n} {} width {width}: ‖QᵀQ − I‖ = {:e}",
                T::NAME,
                orth.sqrt()
            );
        }
    }

    #[test]
    fn merged_block_reflectors_give_the_same_q() {
        if let Some(g) = gpu() {
            merged_q_case::<f64>(&g, 70, (700, 450), 64);
            merged_q_case::<f32>(&g, 71, (533, 301), 48);
            merged_q_case::<f64>(&g, 72, (300, 300), 8);
        }
    }

    /// With Q updated in place (column insertion's use), a Q of at least
    /// `Q_MERGE_MIN_ROWS` rows takes the panels' reflectors merged (up to
    /// `Q_MERGE_WIDTH` columns, then the rest): Q equals the one-block-at-a-time
    /// backward accumulation of the same factorisation's blocks within m·u
    /// (‖ΔQ‖_F/√m), and R and d equal that factorisation's exactly (Q's side does not
    /// touch them).
    fn q_merged_in_place_case<T: GpuScalar>(g: &Gpu, seed: u64, (m, n): (usize, usize), nb: usize) {
        assert!(m >= Q_MERGE_MIN_ROWS && n > Q_MERGE_WIDTH && n > nb);
        let a = rand_mat::<T>(seed, m, n, None);
        let b = rand_mat::<T>(seed + 1, m, 2, None);
        let out = factor(g, &a, &b, None, nb, true, PanelImpl::Auto);
        let mut da = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut dd = DevMat::from_host(g, b.as_ref()).unwrap();
        let mut blocks = Vec::new();
        let outputs = QrOutputs {
            d: Some(&mut dd),
            keep: Some(&mut blocks),
            ..QrOutputs::default()
        };
        blocked_qr_with(g, &mut da, outputs, &merged_params(m, n, nb)).unwrap();
        let what = format!("{m}x{n} {} nb {nb}", T::NAME);
        assert_eq!(out.r, to64(&da.to_host(g).unwrap()), "{what}: R");
        assert_eq!(out.d, to64(&dd.to_host(g).unwrap()), "{what}: d");
        let mut q0 = DevMat::<T>::zeros(g, m, m).unwrap();
        accumulate_q_merged(g, &blocks, &mut q0, 0).unwrap();
        let q0 = to64(&q0.to_host(g).unwrap());
        let q = out.q.expect("factored with Q");
        let e = Mat::from_fn(m, m, |i, j| q[(i, j)] - q0[(i, j)]).norm_fro() / (m as f64).sqrt();
        let tol = m as f64 * T::UNIT_ROUNDOFF;
        assert!(
            e <= tol,
            "{what}: ‖Q_merged − Q_per-block‖/√m = {e:e} > {tol:e}"
        );
        // Not a copy of the input: Q has left the identity everywhere it should.
        assert!(
            q[(m - 1, 0)] != 0.0 && q[(0, 0)] != 1.0,
            "{what}: Q left unchanged"
        );
    }

    #[test]
    fn q_merged_in_place_matches_per_block() {
        if let Some(g) = gpu() {
            // 15 panels of 20: a merge of 12 panels (240 columns; a 13th would pass
            // 256), then one of the last 3. f32: 8 panels of 32 fill 256 exactly, then
            // one of 14 columns.
            q_merged_in_place_case::<f64>(&g, 80, (4133, 300), 20);
            q_merged_in_place_case::<f32>(&g, 81, (4100, 270), 32);
        }
    }

    /// A profiled factorisation (events around every phase, no look-ahead) computes
    /// exactly what the in-order panels compute, and every phase it ran took time.
    fn profiled_case<T: GpuScalar>(g: &Gpu, seed: u64, (m, n): (usize, usize), nb: usize) {
        let a = rand_mat::<T>(seed, m, n, None);
        let b = rand_mat::<T>(seed + 1, m, 2, None);
        let io = factor(g, &a, &b, None, nb, true, PanelImpl::FusedInOrder);
        let mut da = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut dd = DevMat::from_host(g, b.as_ref()).unwrap();
        let mut dq = DevMat::<T>::zeros(g, m, m).unwrap();
        g.panel_set_identity(&mut dq.view_mut()).unwrap();
        let mut clock = QrClock::new();
        let outputs = QrOutputs {
            d: Some(&mut dd),
            q: Some(&mut dq),
            keep: None,
            clock: Some(&mut clock),
        };
        blocked_qr_with(g, &mut da, outputs, &merged_params(m, n, nb)).unwrap();
        let what = format!("{m}x{n} {} nb {nb}", T::NAME);
        assert!(to64(&da.to_host(g).unwrap()) == io.r, "{what}: R differs");
        assert!(to64(&dd.to_host(g).unwrap()) == io.d, "{what}: d differs");
        assert!(
            Some(to64(&dq.to_host(g).unwrap())) == io.q,
            "{what}: Q differs"
        );
        let t = clock.totals_ms().unwrap();
        for (name, i) in [
            ("panel", PHASE_PANEL),
            ("trailing", PHASE_TRAILING),
            ("rhs", PHASE_RHS),
            ("Q", PHASE_Q),
        ] {
            assert!(
                t[i] > 0.0 && t[i].is_finite(),
                "{what}: {name} phase {}",
                t[i]
            );
        }
        assert_eq!(
            t[PHASE_RANK], 0.0,
            "{what}: no rank check inside blocked_qr"
        );
    }

    #[test]
    fn profiled_factorisation_matches_in_order_panels() {
        if let Some(g) = gpu() {
            profiled_case::<f64>(&g, 60, (1000, 700), 64);
            profiled_case::<f32>(&g, 61, (777, 301), 48);
        }
    }

    #[test]
    fn fused_panel_matches_per_column_and_identities_f64() {
        if let Some(g) = gpu() {
            cases::<f64>(&g);
        }
    }

    #[test]
    fn fused_panel_matches_per_column_and_identities_f32() {
        if let Some(g) = gpu() {
            cases::<f32>(&g);
        }
    }
}

mod panel_tests {
    //! One panel through `fused_panel_qr` or the TSQR panel against the per-column kernels
    //! (`householder_house` + `panel_apply`, `panel_extract_v`, `wy_build_t`):
    //! R, V, τ and T agree to a few ulps of the data.
    use super::*;
    use crate::{Mat, Scalar};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn close<T: Scalar>(what: &str, x: &Mat<T>, y: &Mat<T>, tol: f64) {
        assert_eq!((x.nrows(), x.ncols()), (y.nrows(), y.ncols()));
        let mut worst = (0.0f64, 0, 0);
        for j in 0..x.ncols() {
            for i in 0..x.nrows() {
                let d = (x[(i, j)].to_f64() - y[(i, j)].to_f64()).abs();
                if d > worst.0 || d.is_nan() {
                    worst = (d, i, j);
                }
            }
        }
        let (d, i, j) = worst;
        assert!(
            d <= tol,
            "{what}: |fused − per-column| = {d:e} at ({i},{j}): {} vs {}",
            x[(i, j)].to_f64(),
            y[(i, j)].to_f64()
        );
    }

    /// Which panel kernel a test runs against the per-column reference.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Variant {
        /// `fused_panel_qr`, slab in shared memory where it fits.
        Slab,
        /// `fused_panel_qr` forced in place.
        InPlace,
        /// The TSQR panel (jb ≤ 32).
        Tsqr,
    }

    fn one<T: GpuScalar>(g: &Gpu, seed: u64, m: usize, jb: usize, variant: Variant) {
        one_scaled::<T>(g, seed, m, jb, variant, 1.0);
    }

    /// [`one`] on the random panel times `scale` (a power of two: the reference stays
    /// exact), with R compared relative to `scale` (V, τ and T do not scale).
    fn one_scaled<T: GpuScalar>(
        g: &Gpu,
        seed: u64,
        m: usize,
        jb: usize,
        variant: Variant,
        scale: f64,
    ) {
        one_col_scaled::<T>(g, seed, m, jb, variant, &vec![scale; jb]);
    }

    /// The m×jb panel `a` on the device and its V (m×jb), τ and T (jb×jb) outputs filled
    /// with NaN, so that an entry a panel kernel leaves unwritten shows.
    fn poisoned_panel<T: GpuScalar>(
        g: &Gpu,
        a: &Mat<T>,
    ) -> (DevMat<T>, DevMat<T>, DevVec<T>, DevMat<T>) {
        let (m, jb) = (a.nrows(), a.ncols());
        let nan = T::from_f64(f64::NAN);
        let fa = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut fv = DevMat::<T>::zeros(g, m, jb).unwrap();
        fv.fill(g, nan).unwrap();
        let mut ftau = DevVec::<T>::zeros(g, jb).unwrap();
        ftau.fill(g, nan).unwrap();
        let mut ft = DevMat::<T>::zeros(g, jb, jb).unwrap();
        ft.fill(g, nan).unwrap();
        (fa, fv, ftau, ft)
    }

    /// The whole of `a` (m×jb) as one TSQR panel: R in place, V, τ, T out.
    fn tsqr_whole<T: GpuScalar>(
        g: &Gpu,
        a: &mut DevMat<T>,
        v: &mut DevMat<T>,
        tau: &mut DevVec<T>,
        t: &mut DevMat<T>,
    ) {
        let (m, jb) = (a.nrows(), a.ncols());
        let mut work = TsqrWork::new(g, m).unwrap();
        g.tsqr_panel(
            &mut work,
            a,
            0,
            0,
            m,
            jb,
            &mut v.view_mut(),
            tau,
            &mut t.view_mut(),
        )
        .unwrap();
    }

    /// [`one`] on the random panel with column j times `scales[j]` (powers of two):
    /// QR(A·D) = Q·(R·D), so V, τ and T are those of A and R's column j is compared
    /// relative to `scales[j]`.
    fn one_col_scaled<T: GpuScalar>(
        g: &Gpu,
        seed: u64,
        m: usize,
        jb: usize,
        variant: Variant,
        scales: &[f64],
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let a = Mat::<T>::from_fn(m, jb, |_, j| {
            T::from_f64(rng.random_range(-1.0..1.0) * scales[j])
        });
        let (lo, hi) = scales
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(l, h), &s| (l.min(s), h.max(s)));
        let what = format!(
            "{m}x{jb} {} {variant:?} column scales {lo:e}..{hi:e}",
            T::NAME
        );
        // Per-column reference.
        let mut ra = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut rtau = DevVec::<T>::zeros(g, jb).unwrap();
        for i in 0..jb {
            g.house_at(&mut ra, i, i, m - i - 1, &mut rtau, i).unwrap();
            g.panel_apply_in(&mut ra, i, i, m - i - 1, i + 1..jb, &rtau, i)
                .unwrap();
        }
        let mut rv = DevMat::<T>::zeros(g, m, jb).unwrap();
        g.panel_extract_v(&mut ra.view_mut(), &mut rv.view_mut())
            .unwrap();
        let mut rt = DevMat::<T>::zeros(g, jb, jb).unwrap();
        g.wy_build_t(&rv.view(), &rtau.slice(0..jb), &mut rt.view_mut())
            .unwrap();
        // The variant, outputs poisoned first.
        let (mut fa, mut fv, mut ftau, mut ft) = poisoned_panel(g, &a);
        if variant == Variant::Tsqr {
            tsqr_whole(g, &mut fa, &mut fv, &mut ftau, &mut ft);
        } else {
            let mut work = FusedPanelWork::new(g).unwrap();
            work.force_in_place = variant == Variant::InPlace;
            g.fused_panel_qr(
                &mut work,
                &mut fa,
                0,
                0,
                m,
                jb,
                None,
                &mut fv.view_mut(),
                &mut ftau,
                &mut ft.view_mut(),
            )
            .unwrap();
        }
        let tol = 50.0 * m as f64 * T::UNIT_ROUNDOFF;
        let tau_f = Mat::from_fn(jb, 1, |i, _| ftau.to_vec(g).unwrap()[i]);
        let tau_r = Mat::from_fn(jb, 1, |i, _| rtau.to_vec(g).unwrap()[i]);
        close(&format!("{what} tau"), &tau_f, &tau_r, tol);
        let unscaled = |x: Mat<T>| Mat::from_fn(m, jb, |i, j| x[(i, j)].to_f64() / scales[j]);
        close(
            &format!("{what} R"),
            &unscaled(fa.to_host(g).unwrap()),
            &unscaled(ra.to_host(g).unwrap()),
            tol,
        );
        close(
            &format!("{what} V"),
            &fv.to_host(g).unwrap(),
            &rv.to_host(g).unwrap(),
            tol,
        );
        close(
            &format!("{what} T"),
            &ft.to_host(g).unwrap(),
            &rt.to_host(g).unwrap(),
            tol,
        );
    }

    #[test]
    fn single_panels_match_per_column() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        for variant in [Variant::Slab, Variant::InPlace] {
            one::<f64>(&g, 1, 40, 8, variant);
            one::<f64>(&g, 2, 33, 33, variant);
            one::<f64>(&g, 3, 1000, 33, variant);
            one::<f64>(&g, 4, 9001, 64, variant);
            one::<f32>(&g, 5, 1000, 33, variant);
            one::<f32>(&g, 6, 77, 1, variant);
        }
    }

    #[test]
    fn tsqr_panels_match_per_column() {
        // One leaf (40, 33, 32 rows), two levels (1000: 2 leaves, the last ragged),
        // three (70001), one column; the tree's R, V, τ and T reconstructed must be the
        // per-column factorisation's to rounding.
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        let t = Variant::Tsqr;
        one::<f64>(&g, 21, 40, 8, t);
        one::<f64>(&g, 22, 33, 32, t);
        one::<f64>(&g, 23, 32, 32, t);
        one::<f64>(&g, 24, 1000, 32, t);
        one::<f64>(&g, 25, 9001, 17, t);
        one::<f64>(&g, 26, 70_001, 32, t);
        one::<f64>(&g, 27, 777, 1, t);
        one::<f32>(&g, 28, 1000, 32, t);
        one::<f32>(&g, 29, 70_001, 20, t);
        one::<f32>(&g, 30, 300, 3, t);
        // A leaf whose short last block would start a chain of its own (3 blocks, two a
        // chain, the last of one row): it joins the chain before.
        one::<f64>(&g, 31, 577, 32, t);
        one::<f32>(&g, 32, 1089, 13, t);
    }

    #[test]
    fn extreme_scales_neither_overflow_nor_underflow() {
        // Squares of these entries overflow or underflow: the power-of-two scaling of
        // the partial norms must keep R, V, τ and T as the per-column (scaled) kernels
        // compute them (docs/algorithms.md#householder-vectors,
        // docs/algorithms.md#householder-norm-scaling).
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        for variant in [Variant::Slab, Variant::InPlace, Variant::Tsqr] {
            let jb = if variant == Variant::Tsqr { 32 } else { 40 };
            one_scaled::<f64>(&g, 7, 3000, jb, variant, 2f64.powi(700));
            one_scaled::<f64>(&g, 8, 3000, jb, variant, 2f64.powi(-700));
            one_scaled::<f32>(&g, 9, 3000, jb, variant, 2f64.powi(90));
            one_scaled::<f32>(&g, 10, 3000, jb, variant, 2f64.powi(-90));
        }
    }

    /// The rank check with its scratch kept on `Gpu` (the updates' check): a wide R
    /// grows the scratch, narrower ones after it read back only their own outputs; the
    /// verdicts (column, |R_jj|, tolerance) are those of the CPU check on the same R.
    fn rank_checks_case<T: GpuScalar>(g: &Gpu) {
        for (seed, m, n, bad) in [
            (1u64, 9usize, 7usize, None),
            (2, 3100, 3000, None),
            (3, 40, 5, Some(3usize)),
            (4, 3100, 3000, Some(2999)),
            (5, 12, 11, Some(0)),
            (6, 33, 31, None),
        ] {
            let mut rng = StdRng::seed_from_u64(seed);
            // Upper triangular, entries of magnitude in [0.1, 1), random signs.
            let mut r = Mat::<T>::from_fn(m, n, |i, j| {
                let x: f64 = rng.random_range(0.1..1.0);
                let x = if rng.random_bool(0.5) { x } else { -x };
                if i > j {
                    T::ZERO
                } else {
                    T::from_f64(x)
                }
            });
            if let Some(j) = bad {
                r[(j, j)] = T::from_f64(1e-30);
            }
            let dr = DevMat::from_host(g, r.as_ref()).unwrap();
            let got = crate::gpu::algo::rank::check_rank_dev(g, &dr, n, 1e-8);
            let want = crate::base::dims::check_rank_of(&r, n, 1e-8);
            match (&got, &want) {
                (Ok(()), Ok(())) => assert!(bad.is_none(), "n={n}: deficiency missed"),
                (
                    Err(Error::RankDeficient { column: cg, .. }),
                    Err(Error::RankDeficient { column: cc, .. }),
                ) => {
                    assert_eq!((Some(*cg), *cg), (bad, *cc), "n={n}");
                }
                _ => panic!("n={n}: GPU {got:?} against CPU {want:?}"),
            }
        }
    }

    #[test]
    fn rank_checks_for_updates_wide_then_narrow() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        rank_checks_case::<f64>(&g);
        rank_checks_case::<f32>(&g);
    }

    /// A TSQR panel of a rank-deficient matrix (a zero column, a repeated column, a
    /// multiple of another, and a column that is zero in the first rows): the
    /// per-column reference's reflectors are not unique there (τ = 0 against a
    /// reflection), so the factorisation itself is checked, in f64 on the host:
    /// Q₁ = (I − V T Vᵀ)[I; 0] has orthonormal columns and Q₁R = A, both to
    /// 50·m·u, R exactly zero below its diagonal.
    fn rank_deficient_tsqr<T: GpuScalar>(g: &Gpu, seed: u64, m: usize) {
        let jb = 32;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut a = Mat::<T>::from_fn(m, jb, |_, _| T::from_f64(rng.random_range(-1.0..1.0)));
        for i in 0..m {
            a[(i, 5)] = T::ZERO;
            a[(i, 9)] = a[(i, 3)];
            a[(i, 20)] = T::from_f64(2.0 * a[(i, 1)].to_f64());
            if i < m / 2 {
                a[(i, 0)] = T::ZERO;
            }
        }
        let what = format!("{m}x{jb} {} rank-deficient TSQR", T::NAME);
        let (mut fa, mut fv, mut ftau, mut ft) = poisoned_panel(g, &a);
        tsqr_whole(g, &mut fa, &mut fv, &mut ftau, &mut ft);
        let r = fa.to_host(g).unwrap();
        let v = fv.to_host(g).unwrap();
        let t = ft.to_host(g).unwrap();
        let f = |x: T| x.to_f64();
        // Q₁ = [I; 0] − V·(T·V₁ᵀ), with V₁ the top jb×jb of V.
        let mut tv1 = vec![0.0f64; jb * jb];
        for i in 0..jb {
            for j in 0..jb {
                tv1[i + j * jb] = (0..jb).map(|k| f(t[(i, k)]) * f(v[(j, k)])).sum();
            }
        }
        let mut q = vec![0.0f64; m * jb];
        for i in 0..m {
            for j in 0..jb {
                let vt: f64 = (0..jb).map(|k| f(v[(i, k)]) * tv1[k + j * jb]).sum();
                q[i + j * m] = if i == j { 1.0 } else { 0.0 } - vt;
            }
        }
        let tol = 50.0 * m as f64 * T::UNIT_ROUNDOFF;
        let (mut orth, mut back, mut norm_a) = (0.0f64, 0.0f64, 0.0f64);
        for i in 0..jb {
            for j in 0..jb {
                let d: f64 = (0..m).map(|k| q[k + i * m] * q[k + j * m]).sum::<f64>()
                    - if i == j { 1.0 } else { 0.0 };
                orth += d * d;
                if i > j {
                    assert!(
                        r[(i, j)] == T::ZERO,
                        "{what}: R({i},{j}) = {:e}",
                        f(r[(i, j)])
                    );
                }
            }
        }
        for i in 0..m {
            for j in 0..jb {
                let qr: f64 = (0..=j.min(jb - 1))
                    .map(|k| q[i + k * m] * f(r[(k, j)]))
                    .sum();
                let x = f(a[(i, j)]);
                back += (qr - x) * (qr - x);
                norm_a += x * x;
            }
        }
        let (orth, back) = (orth.sqrt(), (back / norm_a).sqrt());
        assert!(orth <= tol, "{what}: ‖Q₁ᵀQ₁ − I‖ = {orth:e} > {tol:e}");
        assert!(back <= tol, "{what}: ‖Q₁R − A‖/‖A‖ = {back:e} > {tol:e}");
        assert!(
            ftau.to_vec(g)
                .unwrap()
                .iter()
                .all(|x| x.to_f64().is_finite()),
            "{what}: τ not finite"
        );
    }

    #[test]
    fn tsqr_panel_of_a_rank_deficient_matrix() {
        // One leaf, two levels, and a tall panel whose leaf 0 chains its blocks in
        // reverse (warp 0's first block is not the panel's top block).
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        for m in [200, 3001, 70_001] {
            rank_deficient_tsqr::<f64>(&g, 51, m);
            rank_deficient_tsqr::<f32>(&g, 52, m);
        }
    }

    #[test]
    fn tsqr_panel_with_columns_of_far_apart_scales() {
        // Columns scaled by powers of two far apart (squares and cross products of the
        // unscaled entries overflow or underflow): each column is scaled by its own
        // power of two inside the leaves, so R, V, τ and T must match the per-column
        // kernels, R column by column relative to its scale.
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        let e64 = [700, -700, 0, 300, -1000, 500, -300, 0];
        let e32 = [90, -90, 0, 40, -100, 60, -40, 0];
        for (jb, m) in [(32, 3001), (13, 70_001)] {
            let s64: Vec<f64> = (0..jb).map(|j| 2f64.powi(e64[j % 8])).collect();
            one_col_scaled::<f64>(&g, 41, m, jb, Variant::Tsqr, &s64);
            let s32: Vec<f64> = (0..jb).map(|j| 2f64.powi(e32[j % 8])).collect();
            one_col_scaled::<f32>(&g, 42, m, jb, Variant::Tsqr, &s32);
        }
    }
}

/// The GPU gate of the in-crate GPU tests: a device, or `None` after printing that the
/// test skipped (a panic with `CUQR_REQUIRE_GPU=1`).
pub(crate) fn tests_gate() -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(g) => Some(g),
        Err(e) if std::env::var("CUQR_REQUIRE_GPU").as_deref() == Ok("1") => {
            panic!("CUQR_REQUIRE_GPU=1 but no GPU: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}
