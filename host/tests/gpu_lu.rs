//! The GPU blocked LU with partial pivoting against the CPU reference and
//! faer: ‖PA − LU‖_F/‖A‖_F ≤ 10·max(m, n)·u, solve backward error ≤ 10·n·u
//! (docs/algorithms.md#accuracy-measures), the same pivots as the CPU backend (f64), log|det|
//! agreement, rectangular
//! shapes, structured inputs that need pivoting, and the singular error naming the
//! column. Skips without a device unless `CUQR_REQUIRE_GPU=1`.

mod common;

use std::sync::Arc;

use cuqr::internals::gpu::DevMat;
use cuqr::lu::{CpuLu, GpuLu, LuParams};
use cuqr::{Error, Gpu, Mat, Scalar};

fn to_faer<T: Scalar>(a: &Mat<T>) -> faer::Mat<f64> {
    faer::Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64())
}

fn fact_err<T: Scalar>(a: &Mat<T>, perm: &[usize], l: &Mat<T>, u: &Mat<T>) -> f64 {
    let (fa, fl, fu) = (to_faer(a), to_faer(l), to_faer(u));
    let lu = &fl * &fu;
    let pa = faer::Mat::from_fn(a.nrows(), a.ncols(), |i, j| fa[(perm[i], j)]);
    (&pa - &lu).norm_l2() / fa.norm_l2()
}

fn backward_err<T: Scalar>(a: &Mat<T>, x: &Mat<T>, b: &Mat<T>) -> f64 {
    let (fa, fx, fb) = (to_faer(a), to_faer(x), to_faer(b));
    (&(&fa * &fx) - &fb).norm_l2() / (fa.norm_l2() * fx.norm_l2())
}

fn params(nb: Option<usize>, base: Option<usize>) -> LuParams {
    let mut p = LuParams::default();
    p.block_size = nb;
    p.panel_base = base;
    p
}

/// Factor on the GPU and the CPU, check both against the tolerances and each other.
fn check<T: cuqr::GpuScalar>(g: &Arc<Gpu>, a: &Mat<T>, p: LuParams, seed: u64) {
    let (m, n) = (a.nrows(), a.ncols());
    let u = common::u::<T>();
    let tol = 10.0 * m.max(n) as f64 * u;
    let glu = GpuLu::factorize(g, a.as_ref(), p).unwrap();
    let e = fact_err(a, &glu.perm(), &glu.l().unwrap(), &glu.u().unwrap());
    assert!(
        e <= tol,
        "{m}x{n} {}: GPU ‖PA−LU‖/‖A‖ = {e:e} > {tol:e}",
        T::NAME
    );
    let clu = CpuLu::factorize(a.as_ref(), p).unwrap();
    if T::NAME == "f64" {
        assert_eq!(glu.ipiv(), clu.ipiv(), "{m}x{n}: GPU and CPU pivots differ");
    }
    // packed factors agree up to rounding (same pivots, f64)
    if glu.ipiv() == clu.ipiv() {
        let gp = glu.packed().unwrap();
        let cp = clu.packed();
        let d = common::max_abs_diff(gp.as_slice(), cp.to_owned().as_slice());
        let s = common::max_abs(cp.to_owned().as_slice()).max(1.0);
        assert!(d <= 100.0 * tol * s, "{m}x{n}: packed LU differs by {d:e}");
    }
    let k = m.min(n);
    assert_eq!(glu.ipiv().len(), k);
    if m == n {
        let mut rng = common::rng(seed);
        let b: Mat<T> = common::signed_mat(&mut rng, n, 3);
        let x = glu.solve(b.as_ref()).unwrap();
        let be = backward_err(a, &x, &b);
        assert!(
            be <= 10.0 * n as f64 * u,
            "{n} {}: backward error {be:e}",
            T::NAME
        );
        let (gs, gl) = glu.det_sign_log();
        let (cs, cl) = clu.det_sign_log();
        assert_eq!(gs, cs, "det sign");
        assert!(
            (gl - cl).abs() <= 10.0 * (n * n) as f64 * u + 1e-12,
            "log|det| {gl} vs {cl}"
        );
    }
}

fn random<T: cuqr::GpuScalar>(g: &Arc<Gpu>) {
    let cases: &[(usize, usize, Option<usize>, Option<usize>)] = &[
        (1, 1, None, None),
        (33, 33, None, None),
        (127, 127, Some(16), Some(4)),
        (257, 257, None, None),
        (257, 257, Some(100), Some(7)),
        (1000, 1000, None, None),
        (2049, 2049, Some(256), Some(32)),
        (1500, 1100, Some(256), Some(64)),
        (300, 170, Some(64), Some(16)),
        (170, 300, Some(64), Some(16)),
    ];
    for (idx, &(m, n, nb, base)) in cases.iter().enumerate() {
        let mut rng = common::rng(500 + idx as u64);
        let a: Mat<T> = common::signed_mat(&mut rng, m, n);
        for (v, p) in variants(nb, base).into_iter().enumerate() {
            check(g, &a, p, 600 + 100 * v as u64 + idx as u64);
        }
    }
}

/// The panel variants every shape runs under: the defaults (on sm_90 the cluster panel
/// where a panel fits one cluster, else the cooperative panel with slabs in shared
/// memory, 64 rows per block, look-ahead where a panel is one launch), the cluster
/// panel with 16-row slabs, the cooperative panel (cluster off) with 16-row slabs
/// (many blocks, pivots in other blocks than row j) in shared and in global memory,
/// and the column-step path with fused one-block base panels and without
/// (fused_rows = 0).
fn variants(nb: Option<usize>, base: Option<usize>) -> Vec<LuParams> {
    let mut out = vec![params(nb, base)];
    let mut p = params(nb, base);
    p.coop_rows = Some(16);
    out.push(p);
    for smem in [true, false] {
        let mut p = params(nb, base);
        p.coop_rows = Some(16);
        p.coop_smem = Some(smem);
        p.cluster_panel = Some(false);
        out.push(p);
    }
    for fused in [None, Some(0)] {
        let mut p = params(nb, base);
        p.coop_panel = Some(false);
        p.fused_rows = fused;
        out.push(p);
    }
    out
}

#[test]
fn gpu_random_f64() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    random::<f64>(&g);
}

#[test]
fn gpu_random_f32() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    random::<f32>(&g);
}

#[test]
fn gpu_tiny_leading_entry_and_reversed_rows() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    let n = 157;
    let mut rng = common::rng(41);
    let mut a: Mat<f64> = common::signed_mat(&mut rng, n, n);
    a[(0, 0)] = 1e-20;
    let glu = GpuLu::factorize(&g, a.as_ref(), params(Some(64), Some(16))).unwrap();
    assert_ne!(glu.ipiv()[0], 0);
    check(&g, &a, params(Some(64), Some(16)), 42);
    let d: Mat<f64> = common::signed_mat(&mut rng, n, n);
    let r = Mat::from_fn(n, n, |i, j| {
        let r = n - 1 - i;
        if r == j {
            10.0 * n as f64
        } else {
            d[(r, j)]
        }
    });
    // the pivot of column j sits in row n−1−j: with 16-row slabs in another block than
    // row j for almost every j
    for (v, p) in variants(Some(64), Some(16))
        .into_iter()
        .chain(variants(Some(64), None))
        .enumerate()
    {
        let glu = GpuLu::factorize(&g, r.as_ref(), p).unwrap();
        assert_eq!(glu.perm(), (0..n).rev().collect::<Vec<_>>(), "variant {v}");
        check(&g, &r, p, 43 + v as u64);
    }
}

#[test]
fn gpu_coop_panel_shapes() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    // (m, n, nb, coop_rows): several blocks, slab boundaries not multiples of 32, slabs
    // beyond the 48 KiB default shared memory (opt-in), panels as wide as 256 (two
    // interchange gathers a panel), rectangular shapes, and one 700-row block whose
    // slab cannot fit in shared memory (global memory even when shared memory is
    // allowed)
    let cases: &[(usize, usize, usize, usize)] = &[
        (97, 97, 32, 8),
        (161, 161, 64, 32),
        (250, 250, 128, 17),
        (515, 515, 128, 128),
        (1025, 1025, 128, 33),
        (600, 211, 96, 50),
        (211, 600, 96, 50),
        (700, 700, 128, 5000),
        (1300, 1300, 256, 64),
        (900, 530, 200, 40),
    ];
    for (idx, &(m, n, nb, rows)) in cases.iter().enumerate() {
        // the cooperative panel in shared and in global memory, then the defaults (the
        // cluster panel where a panel fits one cluster on sm_90)
        for (smem, cluster) in [(true, false), (false, false), (true, true)] {
            let mut p = params(Some(nb), None);
            p.coop_rows = Some(rows);
            p.coop_smem = Some(smem);
            p.cluster_panel = Some(cluster);
            let mut rng = common::rng(900 + idx as u64);
            let a: Mat<f64> = common::signed_mat(&mut rng, m, n);
            check(&g, &a, p, 950 + idx as u64);
            let a: Mat<f32> = common::signed_mat(&mut rng, m, n);
            check(&g, &a, p, 970 + idx as u64);
        }
        // without look-ahead (the default runs the next panel on the second stream
        // during the Schur GEMM)
        let mut p = params(Some(nb), None);
        p.coop_rows = Some(rows);
        p.lookahead = Some(false);
        let mut rng = common::rng(990 + idx as u64);
        let a: Mat<f64> = common::signed_mat(&mut rng, m, n);
        check(&g, &a, p, 995 + idx as u64);
        // U₁₂ by TRSM instead of the inverse of L₁₁, with and without look-ahead
        for lookahead in [true, false] {
            p.lookahead = Some(lookahead);
            p.u12_by_inverse = Some(false);
            check(&g, &a, p, 996 + idx as u64);
        }
    }
}

/// The cluster panel (sm_90) runs the cooperative panel's arithmetic in the same order:
/// the same pivots and bit-identical factors, with the cluster on and off, over shapes
/// where every panel fits one cluster's shared memory, where the first panels do not
/// (256-column panels of 2000 rows in f64 and of 4000 rows in f32 and f64 need more
/// than 16 blocks' shared memory; with leaf splitting off the cooperative launch takes
/// them) and
/// rectangular ones, in both precisions. On devices without clusters
/// both runs take the cooperative panel and the test still checks them against the
/// CPU.
#[test]
fn gpu_cluster_panel_matches_coop_bitwise() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    // (m, n, nb, coop_rows)
    let cases: &[(usize, usize, usize, usize)] = &[
        (333, 333, 64, 64),
        (1000, 1000, 64, 7),
        (2000, 256, 256, 64),
        (4000, 256, 256, 64),
        (1500, 700, 128, 64),
        (450, 900, 64, 100),
    ];
    fn same<T: cuqr::GpuScalar>(g: &Arc<Gpu>, a: &Mat<T>, p: LuParams, what: &str) {
        let mut off = p;
        off.cluster_panel = Some(false);
        let on = GpuLu::factorize(g, a.as_ref(), p).unwrap();
        let off = GpuLu::factorize(g, a.as_ref(), off).unwrap();
        assert_eq!(on.ipiv(), off.ipiv(), "{what}: pivots differ");
        let (x, y) = (on.packed().unwrap(), off.packed().unwrap());
        for j in 0..a.ncols() {
            for i in 0..a.nrows() {
                assert!(
                    x[(i, j)].to_f64().to_bits() == y[(i, j)].to_f64().to_bits(),
                    "{what}: factor ({i}, {j}) differs: {} vs {}",
                    x[(i, j)].to_f64(),
                    y[(i, j)].to_f64()
                );
            }
        }
    }
    for (idx, &(m, n, nb, rows)) in cases.iter().enumerate() {
        // one leaf a panel with the cluster on and off (the default base with the
        // cluster is at most 64), no leaf splitting
        let mut p = params(Some(nb), Some(nb));
        p.coop_rows = Some(rows);
        p.cluster_panel = Some(true);
        p.cluster_leaf_min = Some(usize::MAX);
        let mut rng = common::rng(1200 + idx as u64);
        let a: Mat<f64> = common::signed_mat(&mut rng, m, n);
        same(&g, &a, p, &format!("f64 {m}x{n} nb {nb}"));
        check(&g, &a, p, 1250 + idx as u64);
        let a: Mat<f32> = common::signed_mat(&mut rng, m, n);
        same(&g, &a, p, &format!("f32 {m}x{n} nb {nb}"));
        check(&g, &a, p, 1270 + idx as u64);
    }
}

/// Panels too tall for one cluster split in halves (laswp, TRSM and GEMM between
/// them, on the look-ahead stream where it runs) until the pieces fit: 256-column
/// panels of 2000 and 4000 rows, 64-column panels of 7300 rows in f64 (448 rows a
/// block fit at width 64, 900 at 32), 512-column blocks (four interchange gathers a
/// step), leaves down to 8 or 32 columns, with and
/// without look-ahead, checked against the CPU (same pivots in f64) and the
/// tolerances. Without clusters the leaves stay whole and the checks still hold.
#[test]
fn gpu_tall_panels_split_for_the_cluster() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    // (m, n, nb, leaf_min)
    let cases: &[(usize, usize, usize, Option<usize>)] = &[
        (2000, 256, 256, None),
        (4000, 300, 256, Some(8)),
        (7300, 200, 64, None),
        (7300, 130, 64, Some(32)),
        (3001, 3001, 256, None),
        (1700, 1300, 512, None),
    ];
    for (idx, &(m, n, nb, leaf_min)) in cases.iter().enumerate() {
        for lookahead in [true, false] {
            let mut p = params(Some(nb), None);
            p.cluster_leaf_min = leaf_min;
            p.lookahead = Some(lookahead);
            let mut rng = common::rng(1400 + idx as u64);
            let a: Mat<f64> = common::signed_mat(&mut rng, m, n);
            check(&g, &a, p, 1450 + idx as u64);
            if m <= 4000 {
                let a: Mat<f32> = common::signed_mat(&mut rng, m, n);
                check(&g, &a, p, 1470 + idx as u64);
            }
        }
    }
}

#[test]
fn gpu_coop_nan_column_and_singular() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    let n = 301;
    let mut rng = common::rng(71);
    for (rows, smem) in [(128, true), (16, true), (16, false)] {
        let mut p = params(Some(64), None);
        p.coop_rows = Some(rows);
        p.coop_smem = Some(smem);
        // a NaN column on the device path (no host scan): reported at its pivot
        let a: Mat<f64> = Mat::from_fn(n, n, |_, j| {
            if j == 77 {
                f64::NAN
            } else {
                common::nonzero(&mut rng)
            }
        });
        let da = DevMat::from_host(&g, a.as_ref()).unwrap();
        match GpuLu::factorize_dev(&g, da, p) {
            Err(Error::Singular { column, .. }) => assert_eq!(column, 77),
            other => panic!("expected Singular at 77, got {other:?}"),
        }
        // a zero column: the failing column is reported
        let a: Mat<f32> = Mat::from_fn(n, n, |_, j| {
            if j == 150 {
                0.0
            } else {
                common::nonzero(&mut rng) as f32
            }
        });
        match GpuLu::factorize(&g, a.as_ref(), p) {
            Err(Error::Singular { column, .. }) => assert_eq!(column, 150),
            other => panic!("expected Singular at 150, got {other:?}"),
        }
    }
    let mut p = LuParams::default();
    p.coop_rows = Some(0);
    let a: Mat<f64> = common::signed_mat(&mut rng, 8, 8);
    assert!(matches!(
        GpuLu::factorize(&g, a.as_ref(), p),
        Err(Error::InvalidParam {
            what: "coop_rows",
            ..
        })
    ));
}

#[test]
fn gpu_singular_names_the_column() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    let mut rng = common::rng(51);
    let n = 301;
    let a: Mat<f64> = Mat::from_fn(n, n, |_, j| {
        if j == 222 {
            0.0
        } else {
            common::nonzero(&mut rng)
        }
    });
    match GpuLu::factorize(&g, a.as_ref(), params(Some(64), Some(16))) {
        Err(Error::Singular { column, .. }) => assert_eq!(column, 222),
        other => panic!("expected Singular at 222, got {other:?}"),
    }
    let mut b: Mat<f32> = common::signed_mat(&mut rng, 40, 40);
    for i in 0..40 {
        b[(i, 30)] = b[(i, 3)];
    }
    match GpuLu::factorize(&g, b.as_ref(), LuParams::default()) {
        Err(Error::Singular { column, .. }) => assert_eq!(column, 30),
        other => panic!("expected Singular at 30, got {other:?}"),
    }
    b[(2, 2)] = f32::NAN;
    assert!(matches!(
        GpuLu::factorize(&g, b.as_ref(), LuParams::default()),
        Err(Error::NonFinite { row: 2, col: 2, .. })
    ));
}

#[test]
fn gpu_device_resident_factor_and_solve() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    let n = 777;
    let mut rng = common::rng(61);
    let a: Mat<f64> = common::signed_mat(&mut rng, n, n);
    let b: Mat<f64> = common::signed_mat(&mut rng, n, 5);
    let da = DevMat::from_host(&g, a.as_ref()).unwrap();
    let lu = GpuLu::factorize_dev(&g, da, LuParams::default()).unwrap();
    let mut db = DevMat::from_host(&g, b.as_ref()).unwrap();
    lu.solve_in_place_dev(&mut db).unwrap();
    let x = db.to_host(&g).unwrap();
    let be = backward_err(&a, &x, &b);
    assert!(
        be <= 10.0 * n as f64 * f64::UNIT_ROUNDOFF,
        "backward error {be:e}"
    );
}
