//! Mixed-precision QR and least squares on the GPU (docs/algorithms.md#mixed-precision):
//! the tensor-core GEMM hook (inputs really rounded under a `GemmPrecisionGuard`,
//! restored after it), the mixed QR's backward error of the GEMM precision's order, and
//! the refined f64 least-squares solution on A = U·diag(σ)·Vᵀ with κ = 1e2, 1e4, 1e6
//! for bf16, f16, tf32 and plain f32 GEMMs, whose normwise backward error
//! η = ‖Aᵀr‖/(‖A‖_F(‖A‖_F‖x‖ + ‖b‖)) must be within 10× of that of faer's f64 solution
//! (and ≤ 10·m·u, docs/algorithms.md#accuracy-measures); `NotConverged` when the tolerance cannot
//! be met; errors for
//! bad shapes and non-finite data with the inputs unchanged; data far outside f16's (and
//! f32's) range; the switch of a slow tensor-core factor to f32, the f32 → f64 Gram →
//! QR stages of the default route (and the `GramF64` route), the phase split, and
//! degenerate right-hand sides and widths (b = 0, n = 1, 2). Sizes are not multiples of 32. Skips without a device unless
//! `CUQR_REQUIRE_GPU=1`.

mod common;

use common::{faer_lstsq, two_rhs, with_cond};
use cuqr::internals::gpu::{DevMat, Op};
use cuqr::mixed::{
    ls_backward_error, lstsq_mixed_gpu, lstsq_mixed_gpu_host, lstsq_mixed_gpu_phases, mixed_qr_gpu,
    GemmPrecision, MixedFactor, MixedParams, MixedRoute,
};
use cuqr::{Error, Mat};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PRECS: [GemmPrecision; 4] = [
    GemmPrecision::Bf16,
    GemmPrecision::F16,
    GemmPrecision::Tf32,
    GemmPrecision::F32,
];

/// Under a guard the f32 GEMM rounds its inputs: column 0 of A is 1 + 2⁻⁹ (exact in
/// f16 and tf32, not in bf16), column 1 is 1 + 2⁻¹² (exact in f32 only); times k ones
/// (every partial sum exact in f32, so the order of accumulation does not matter) this
/// gives k·(1 + 2⁻⁹), k·(1 + 2⁻¹²) with plain SGEMM, k, k with bf16 and k·(1 + 2⁻⁹), k
/// with f16 and tf32. The setting reverts when the guard drops, nests, and never touches
/// f64 GEMMs.
#[test]
fn gemm_precision_guard_rounds_f32_gemm_inputs_and_restores() {
    let Some(g) = common::gpu() else { return };
    let (k, n) = (37usize, 5);
    let (x9, x12) = (1.0 + 2f64.powi(-9), 1.0 + 2f64.powi(-12));
    let ah = Mat::<f64>::from_fn(k, 2, |_, j| if j == 0 { x9 } else { x12 });
    let a32 = DevMat::from_host(
        &g,
        Mat::<f32>::from_fn(k, 2, |i, j| ah[(i, j)] as f32).as_ref(),
    )
    .unwrap();
    let b32 = DevMat::from_host(&g, Mat::<f32>::from_fn(k, n, |_, _| 1.0).as_ref()).unwrap();
    let a64 = DevMat::from_host(&g, ah.as_ref()).unwrap();
    let b64 = DevMat::from_host(&g, Mat::<f64>::from_fn(k, n, |_, _| 1.0).as_ref()).unwrap();
    let run32 = || {
        let mut c = DevMat::<f32>::zeros(&g, 2, n).unwrap();
        g.gemm(
            Op::T,
            Op::N,
            1.0f32,
            &a32.view(),
            &b32.view(),
            0.0,
            &mut c.view_mut(),
        )
        .unwrap();
        let c = c.to_host(&g).unwrap();
        for j in 1..n {
            assert_eq!((c[(0, j)], c[(1, j)]), (c[(0, 0)], c[(1, 0)]));
        }
        (c[(0, 0)] as f64, c[(1, 0)] as f64)
    };
    let run64 = || {
        let mut c = DevMat::<f64>::zeros(&g, 2, n).unwrap();
        g.gemm(
            Op::T,
            Op::N,
            1.0f64,
            &a64.view(),
            &b64.view(),
            0.0,
            &mut c.view_mut(),
        )
        .unwrap();
        let c = c.to_host(&g).unwrap();
        (c[(0, 0)], c[(1, 0)])
    };
    let kf = k as f64;
    let exact = (kf * x9, kf * x12);
    assert_eq!(g.gemm_precision(), GemmPrecision::F32);
    assert_eq!(run32(), exact);
    for (p, want) in [
        (GemmPrecision::Bf16, (kf, kf)),
        (GemmPrecision::F16, (kf * x9, kf)),
        (GemmPrecision::Tf32, (kf * x9, kf)),
    ] {
        {
            let _guard = g.gemm_precision_scope(p);
            assert_eq!(g.gemm_precision(), p);
            assert_eq!(run32(), want, "{p:?}");
            assert_eq!(run64(), exact, "{p:?}: f64 GEMM affected");
            {
                let _inner = g.gemm_precision_scope(GemmPrecision::F32);
                assert_eq!(run32(), exact);
            }
            assert_eq!(g.gemm_precision(), p);
        }
        assert_eq!(g.gemm_precision(), GemmPrecision::F32);
        assert_eq!(run32(), exact);
    }
}

/// With k = 1 the GEMM returns its rounded inputs: bf16 and f16 operands are rounded to
/// nearest even exactly as the CPU emulation's `GemmPrecision::round` (ties, f16
/// subnormals, 65520 → ∞); tf32 (cuBLAS's `_FAST_TF32`, a permission) returns either
/// the f32 value or one with 10 stored bits within tf32's rounding.
#[test]
fn half_operands_round_like_the_cpu_emulation() {
    let Some(g) = common::gpu() else { return };
    let mut rng = StdRng::seed_from_u64(40);
    let mut vals: Vec<f32> = vec![
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        1.0 + 2f32.powi(-8),
        1.0 + 3.0 * 2f32.powi(-8),
        65504.0,
        65519.0,
        65520.0,
        -1e6,
        2f32.powi(-24),
        2f32.powi(-25),
        3.0 * 2f32.powi(-26),
        -5.0 * 2f32.powi(-27),
        2f32.powi(-14) * 1.000_3,
        0.0,
        -0.0,
    ];
    for _ in 0..2000 {
        let sign = if rng.random_bool(0.5) { -1.0 } else { 1.0 };
        let e = rng.random_range(-30..17);
        vals.push(sign * rng.random_range(1.0f32..2.0) * 2f32.powi(e));
    }
    let nv = vals.len();
    let a = DevMat::from_host(&g, Mat::<f32>::from_fn(1, nv, |_, j| vals[j]).as_ref()).unwrap();
    let one = DevMat::from_host(&g, Mat::<f32>::from_fn(1, 1, |_, _| 1.0).as_ref()).unwrap();
    for p in [GemmPrecision::Bf16, GemmPrecision::F16, GemmPrecision::Tf32] {
        let mut c = DevMat::<f32>::zeros(&g, nv, 1).unwrap();
        {
            let _guard = g.gemm_precision_scope(p);
            g.gemm(
                Op::T,
                Op::N,
                1.0f32,
                &a.view(),
                &one.view(),
                0.0,
                &mut c.view_mut(),
            )
            .unwrap();
        }
        let c = c.to_host(&g).unwrap();
        for (i, &v) in vals.iter().enumerate() {
            let got = c[(i, 0)];
            if p == GemmPrecision::Tf32 {
                // `_FAST_TF32` only permits tf32: for this k = 1 GEMM cuBLAS (H200) ran an
                // exact f32 kernel (1 + 2⁻¹¹ came back unrounded). Either is accepted:
                // the value itself, or a tf32 value within tf32's rounding of it.
                if got == v || !v.is_finite() {
                    continue;
                }
                let err = (got as f64 - v as f64).abs();
                assert!(
                    err <= 2.0 * p.unit_roundoff() * (v as f64).abs()
                        && got.to_bits() & 0x1FFF == 0,
                    "tf32 {v:e} -> {got:e}"
                );
            } else {
                let want = p.round(v as f64);
                assert!(
                    got == want || (got == 0.0 && want == 0.0),
                    "{p:?} {v:e}: GPU {got:e}, CPU emulation {want:e}"
                );
            }
        }
    }
}

/// ‖R̃ᵀR̃ − AᵀA‖_F/‖A‖_F² of the mixed QR is of the GEMM precision's order
/// (≤ 20·√n·u_low) and, for the three tensor-core formats, clearly above f32's: the
/// tensor cores really did the trailing updates. The precision is plain f32 afterwards.
#[test]
fn mixed_qr_backward_error_is_of_gemm_precision() {
    let Some(g) = common::gpu() else { return };
    let mut rng = StdRng::seed_from_u64(41);
    let (m, n) = (389, 157);
    let a = with_cond::<f64>(&mut rng, m, n, 10.0);
    let da = DevMat::from_host(&g, a.as_ref()).unwrap();
    let fa = faer::Mat::<f64>::from_fn(m, n, |i, j| a[(i, j)]);
    let ata = fa.transpose() * &fa;
    let anorm2 = fa.norm_l2().powi(2);
    for p in PRECS {
        let params = MixedParams {
            precision: p,
            block_size: Some(24),
            ..MixedParams::default()
        };
        let qr = mixed_qr_gpu(&g, &da, &params).unwrap();
        assert_eq!(qr.precision(), p);
        assert_eq!(g.gemm_precision(), GemmPrecision::F32);
        let r = qr.r(&g).unwrap();
        for j in 0..n {
            for i in j + 1..n {
                assert_eq!(r[(i, j)], 0.0, "R̃ not upper triangular at ({i}, {j})");
            }
        }
        let fr = faer::Mat::<f64>::from_fn(n, n, |i, j| r[(i, j)]);
        let e = (fr.transpose() * &fr - &ata).norm_l2() / anorm2;
        let bound = 20.0 * (n as f64).sqrt() * p.unit_roundoff();
        eprintln!("mixed QR {p:?}: ‖R̃ᵀR̃ − AᵀA‖/‖A‖² = {e:.2e} (bound {bound:.1e})");
        assert!(e <= bound, "{p:?}: {e:e} > {bound:e}");
        if p != GemmPrecision::F32 {
            assert!(e > 0.01 * p.unit_roundoff(), "{p:?}: {e:e} looks like f32");
        }
    }
}

fn check_lstsq(seed: u64, m: usize, n: usize, nb: Option<usize>) {
    let Some(g) = common::gpu() else { return };
    let mut rng = StdRng::seed_from_u64(seed);
    let u = f64::EPSILON / 2.0;
    for kappa in [1e2, 1e4, 1e6] {
        let a = with_cond::<f64>(&mut rng, m, n, kappa);
        let b = two_rhs(&mut rng, &a);
        let xf = faer_lstsq(&a, &b);
        let (da, db) = (
            DevMat::from_host(&g, a.as_ref()).unwrap(),
            DevMat::from_host(&g, b.as_ref()).unwrap(),
        );
        for (p, route) in PRECS.iter().map(|&p| (p, MixedRoute::Qr)).chain([
            (GemmPrecision::F32, MixedRoute::Auto),
            (GemmPrecision::F32, MixedRoute::GramF64),
        ]) {
            let params = MixedParams {
                precision: p,
                route,
                block_size: nb,
                ..MixedParams::default()
            };
            let sol = lstsq_mixed_gpu(&g, &da, &db, &params)
                .unwrap_or_else(|e| panic!("{m}x{n} κ={kappa:e} {p:?} {route:?}: {e}"));
            assert!(sol.iterations >= 1 && sol.iterations <= params.max_iterations);
            assert!(sol.backward_error <= 10.0 * m as f64 * u);
            let x = sol.x.to_host(&g).unwrap();
            assert_eq!((x.nrows(), x.ncols()), (n, 2));
            for c in 0..2 {
                let eta = ls_backward_error(a.as_ref(), b.col(c), x.col(c));
                let eta_f = ls_backward_error(a.as_ref(), b.col(c), xf.col(c));
                eprintln!(
                    "{m}x{n} κ={kappa:.0e} {p:?} {route:?} rhs {c}: η {eta:.2e} (faer {eta_f:.2e}), {} steps, {:?}",
                    sol.iterations, sol.factor
                );
                assert!(
                    eta <= 10.0 * eta_f.max(u * 1e-3) && eta <= 10.0 * m as f64 * u,
                    "{m}x{n} κ={kappa:e} {p:?} rhs {c}: η {eta:e} vs faer {eta_f:e}"
                );
            }
        }
        // Inputs unchanged.
        assert_eq!(da.to_host(&g).unwrap(), a);
        assert_eq!(db.to_host(&g).unwrap(), b);
    }
}

#[test]
fn lstsq_matches_faer_backward_error_default_blocks() {
    check_lstsq(42, 389, 157, None);
}

#[test]
fn lstsq_matches_faer_backward_error_small_blocks() {
    check_lstsq(43, 301, 211, Some(24));
}

/// The host convenience gives the device API's answer.
#[test]
fn host_convenience_matches_device_api() {
    let Some(g) = common::gpu() else { return };
    let mut rng = StdRng::seed_from_u64(44);
    let (m, n) = (263, 71);
    let a = with_cond::<f64>(&mut rng, m, n, 1e3);
    let b = two_rhs(&mut rng, &a);
    let params = MixedParams::default();
    let h = lstsq_mixed_gpu_host(&g, a.as_ref(), b.as_ref(), &params).unwrap();
    let (da, db) = (
        DevMat::from_host(&g, a.as_ref()).unwrap(),
        DevMat::from_host(&g, b.as_ref()).unwrap(),
    );
    let d = lstsq_mixed_gpu(&g, &da, &db, &params).unwrap();
    assert_eq!(h.x, d.x.to_host(&g).unwrap());
    assert_eq!(h.iterations, d.iterations);
    assert_eq!(h.backward_error, d.backward_error);
}

/// Data scaled far outside f16's range (1e±30) and outside f32's (1e±200) is handled
/// by the exact power-of-two scaling of the f32 copy: still converges to f64 accuracy.
#[test]
fn extreme_scales_converge() {
    let Some(g) = common::gpu() else { return };
    let mut rng = StdRng::seed_from_u64(45);
    let (m, n) = (197, 67);
    let a0 = with_cond::<f64>(&mut rng, m, n, 1e4);
    let b = two_rhs(&mut rng, &a0);
    for s in [1e30, 1e-30, 1e200, 1e-200] {
        let a = Mat::from_fn(m, n, |i, j| a0[(i, j)] * s);
        for p in [GemmPrecision::F16, GemmPrecision::Bf16] {
            let params = MixedParams {
                precision: p,
                route: MixedRoute::Qr,
                ..MixedParams::default()
            };
            let sol = lstsq_mixed_gpu_host(&g, a.as_ref(), b.as_ref(), &params)
                .unwrap_or_else(|e| panic!("scale {s:e} {p:?}: {e}"));
            for c in 0..2 {
                let eta = ls_backward_error(a.as_ref(), b.col(c), sol.x.col(c));
                assert!(
                    eta <= 10.0 * m as f64 * f64::EPSILON / 2.0,
                    "scale {s:e} {p:?}: η {eta:e}"
                );
            }
        }
    }
}

/// An unreachable tolerance gives `NotConverged` with the steps taken and the finite
/// backward error reached, not an answer.
#[test]
fn unreachable_tolerance_is_not_converged() {
    let Some(g) = common::gpu() else { return };
    let mut rng = StdRng::seed_from_u64(46);
    let (m, n) = (173, 61);
    let a = with_cond::<f64>(&mut rng, m, n, 1e4);
    let b = two_rhs(&mut rng, &a);
    let params = MixedParams {
        precision: GemmPrecision::Bf16,
        route: MixedRoute::Qr,
        max_iterations: 4,
        tol: Some(1e-300),
        ..MixedParams::default()
    };
    match lstsq_mixed_gpu_host(&g, a.as_ref(), b.as_ref(), &params) {
        Err(Error::NotConverged {
            iterations,
            backward_error,
        }) => {
            assert!((1..=4).contains(&iterations));
            assert!(backward_error > 1e-300 && backward_error.is_finite());
        }
        other => panic!("expected NotConverged, got {other:?}"),
    }
    assert_eq!(g.gemm_precision(), GemmPrecision::F32);
}

/// κ = 1e10 and 1e14 (beyond f32's 1/u: the f32 copy of A is numerically singular) with
/// bf16: never a wrong answer — `NotConverged` (or an exactly zero pivot of R̃,
/// `RankDeficient`), or an x whose independently recomputed η meets the tolerance. (On
/// an H200 both met the default tolerance 10·m·u in 6 steps: a normwise backward error
/// is easy to meet once ‖x‖ grows with κ.) At κ = 1e14 with one refinement step and
/// η ≤ 10·u asked: `NotConverged` with the η it did reach, or a solution whose
/// recomputed η meets 10·u (what the H100 gave once short panels went to the one-block
/// kernel).
#[test]
fn ill_conditioned_never_returns_a_wrong_answer() {
    let Some(g) = common::gpu() else { return };
    let mut rng = StdRng::seed_from_u64(47);
    let (m, n) = (211, 97);
    let tol = 10.0 * m as f64 * f64::EPSILON / 2.0;
    for kappa in [1e10, 1e14] {
        let a = with_cond::<f64>(&mut rng, m, n, kappa);
        let b = two_rhs(&mut rng, &a);
        let params = MixedParams {
            precision: GemmPrecision::Bf16,
            route: MixedRoute::Qr,
            ..MixedParams::default()
        };
        let got = lstsq_mixed_gpu_host(&g, a.as_ref(), b.as_ref(), &params);
        eprintln!(
            "κ={kappa:e}: {:?}",
            got.as_ref().map(|s| (s.iterations, s.backward_error))
        );
        match got {
            Err(Error::NotConverged {
                iterations,
                backward_error,
            }) => {
                assert!(iterations >= 1 && iterations <= params.max_iterations);
                assert!(backward_error > tol || backward_error.is_nan());
            }
            Err(Error::RankDeficient { .. }) => {}
            Ok(sol) => {
                for c in 0..2 {
                    let eta = ls_backward_error(a.as_ref(), b.col(c), sol.x.col(c));
                    assert!(eta <= tol, "κ={kappa:e}: η {eta:e} > {tol:e}");
                }
            }
            Err(e) => panic!("unexpected error {e}"),
        }
        if kappa == 1e14 {
            let tight = 10.0 * f64::EPSILON / 2.0;
            let one_step = MixedParams {
                max_iterations: 1,
                tol: Some(tight),
                ..params
            };
            match lstsq_mixed_gpu_host(&g, a.as_ref(), b.as_ref(), &one_step) {
                Err(Error::NotConverged {
                    iterations,
                    backward_error,
                }) => {
                    assert_eq!(iterations, 1);
                    assert!(backward_error > tight && backward_error.is_finite());
                }
                // The factor of the one-block panels lets one step reach 10·u
                // here (H100: η = 2.9e-16); an answer is then right only if the
                // independently recomputed η meets the tight tolerance.
                Ok(sol) => {
                    assert!(sol.iterations == 1);
                    for c in 0..2 {
                        let eta = ls_backward_error(a.as_ref(), b.col(c), sol.x.col(c));
                        assert!(eta <= tight, "κ=1e14, one step: η {eta:e} > {tight:e}");
                    }
                }
                Err(e) => panic!("expected NotConverged or a solution, got {e}"),
            }
        }
    }
}

#[test]
fn bad_inputs_are_errors_and_change_nothing() {
    let Some(g) = common::gpu() else { return };
    let p = MixedParams::default();
    let a = Mat::<f64>::from_fn(9, 4, |i, j| {
        ((i * 3 + j * 5) % 7) as f64 + (i == j) as u8 as f64
    });
    let b = Mat::<f64>::from_fn(9, 1, |i, _| i as f64);
    let (da, db) = (
        DevMat::from_host(&g, a.as_ref()).unwrap(),
        DevMat::from_host(&g, b.as_ref()).unwrap(),
    );
    // b with the wrong number of rows; b without columns.
    let b8 = DevMat::from_host(&g, Mat::<f64>::zeros(8, 1).as_ref()).unwrap();
    assert!(matches!(
        lstsq_mixed_gpu(&g, &da, &b8, &p),
        Err(Error::Shape {
            what: "rows of b",
            ..
        })
    ));
    let b0 = DevMat::<f64>::zeros(&g, 9, 0).unwrap();
    assert!(matches!(
        lstsq_mixed_gpu(&g, &da, &b0, &p),
        Err(Error::Shape {
            what: "columns of b",
            ..
        })
    ));
    // Underdetermined and empty A.
    let wide = DevMat::from_host(&g, Mat::<f64>::zeros(3, 5).as_ref()).unwrap();
    let b3 = DevMat::from_host(&g, Mat::<f64>::zeros(3, 1).as_ref()).unwrap();
    assert!(matches!(
        lstsq_mixed_gpu(&g, &wide, &b3, &p),
        Err(Error::Underdetermined { m: 3, n: 5, .. })
    ));
    let empty = DevMat::<f64>::zeros(&g, 9, 0).unwrap();
    assert!(matches!(
        lstsq_mixed_gpu(&g, &empty, &db, &p),
        Err(Error::Shape { .. })
    ));
    // Bad parameters.
    for bad in [
        MixedParams {
            block_size: Some(0),
            ..p
        },
        MixedParams {
            max_iterations: 0,
            ..p
        },
        MixedParams {
            tol: Some(f64::NAN),
            ..p
        },
    ] {
        assert!(matches!(
            lstsq_mixed_gpu(&g, &da, &db, &bad),
            Err(Error::InvalidParam { .. })
        ));
    }
    // Non-finite A (located) and b.
    let mut an = a.clone();
    an[(6, 2)] = f64::NAN;
    let dan = DevMat::from_host(&g, an.as_ref()).unwrap();
    assert!(matches!(
        lstsq_mixed_gpu(&g, &dan, &db, &p),
        Err(Error::NonFinite {
            what: "A",
            row: 6,
            col: 2,
            ..
        })
    ));
    let mut bn = b.clone();
    bn[(4, 0)] = f64::INFINITY;
    let dbn = DevMat::from_host(&g, bn.as_ref()).unwrap();
    assert!(matches!(
        lstsq_mixed_gpu(&g, &da, &dbn, &p),
        Err(Error::NonFinite {
            what: "b",
            row: 4,
            col: 0,
            ..
        })
    ));
    assert!(matches!(
        lstsq_mixed_gpu_host(&g, an.as_ref(), b.as_ref(), &p),
        Err(Error::NonFinite { what: "A", .. })
    ));
    // Exactly dependent columns: R̃ has a zero diagonal entry.
    let z = Mat::<f64>::from_fn(9, 4, |i, j| if j == 3 { 0.0 } else { (i + j) as f64 });
    let dz = DevMat::from_host(&g, z.as_ref()).unwrap();
    assert!(matches!(
        lstsq_mixed_gpu(&g, &dz, &db, &p),
        Err(Error::RankDeficient { .. })
    ));
    // Nothing changed, the GEMM precision is back to plain f32, and a good call works.
    assert_eq!(da.to_host(&g).unwrap(), a);
    assert_eq!(db.to_host(&g).unwrap(), b);
    assert_eq!(g.gemm_precision(), GemmPrecision::F32);
    let sol = lstsq_mixed_gpu(&g, &da, &db, &p).unwrap();
    assert!(sol.backward_error <= 10.0 * 9.0 * f64::EPSILON / 2.0);
}

/// The preconditioner stages: with the QR route a tensor-core factor with u_low·κ ≫ 1
/// (bf16 at κ = 1e6: u·κ ≈ 4e3) does not bring the first inner CG to its target within
/// 30 steps and the solver re-factors in f32 and says so; at κ = 1e2 tf32 (u·κ ≈ 0.05)
/// and f32 keep their own factor. The auto route uses the f32 Gram-Cholesky factor at
/// κ = 1e2 (n·u_f32·κ² ≈ 2e-3) and the f64 one at κ = 1e6 (κ² beyond f32, within f64),
/// whatever the GEMM precision; the `GramF64` route starts there. All
/// reach the f64 accuracy; the phase split is reported, positive, and the solution is
/// the one of the plain call; cuBLAS is back in host pointer mode afterwards.
#[test]
fn preconditioner_stages_switch_when_slow() {
    let Some(g) = common::gpu() else { return };
    let mut rng = StdRng::seed_from_u64(48);
    let (m, n) = (421, 173);
    let u = f64::EPSILON / 2.0;
    for (kappa, p, route, expect) in [
        (
            1e6,
            GemmPrecision::Bf16,
            MixedRoute::Qr,
            MixedFactor::Qr(GemmPrecision::F32),
        ),
        (
            1e2,
            GemmPrecision::Tf32,
            MixedRoute::Qr,
            MixedFactor::Qr(GemmPrecision::Tf32),
        ),
        (
            1e6,
            GemmPrecision::F32,
            MixedRoute::Qr,
            MixedFactor::Qr(GemmPrecision::F32),
        ),
        (
            1e2,
            GemmPrecision::F32,
            MixedRoute::Auto,
            MixedFactor::GramCholesky,
        ),
        (
            1e6,
            GemmPrecision::F32,
            MixedRoute::Auto,
            MixedFactor::GramCholeskyF64,
        ),
        (
            1e6,
            GemmPrecision::Tf32,
            MixedRoute::Auto,
            MixedFactor::GramCholeskyF64,
        ),
        (
            1e2,
            GemmPrecision::Tf32,
            MixedRoute::GramF64,
            MixedFactor::GramCholeskyF64,
        ),
    ] {
        let a = with_cond::<f64>(&mut rng, m, n, kappa);
        let b = two_rhs(&mut rng, &a);
        let (da, db) = (
            DevMat::from_host(&g, a.as_ref()).unwrap(),
            DevMat::from_host(&g, b.as_ref()).unwrap(),
        );
        let params = MixedParams {
            precision: p,
            route,
            ..MixedParams::default()
        };
        let sol = lstsq_mixed_gpu_phases(&g, &da, &db, &params).unwrap();
        eprintln!(
            "κ={kappa:.0e} {p:?} {route:?}: factor {:?}, {} steps, {} CG steps, {:?}",
            sol.factor, sol.iterations, sol.inner_steps, sol.phases
        );
        assert_eq!(sol.factor, expect, "κ={kappa:e} {p:?} {route:?}");
        assert!(sol.inner_steps >= sol.iterations);
        if route == MixedRoute::Qr && expect != MixedFactor::Qr(p) {
            assert!(sol.inner_steps >= 30);
        }
        let ph = sol.phases.expect("phases requested");
        assert!(ph.factor_ms > 0.0 && ph.refine_ms > 0.0, "{ph:?}");
        assert!(sol.backward_error <= 10.0 * m as f64 * u);
        let x = sol.x.to_host(&g).unwrap();
        for c in 0..2 {
            let eta = ls_backward_error(a.as_ref(), b.col(c), x.col(c));
            assert!(eta <= 10.0 * m as f64 * u, "κ={kappa:e} {p:?}: η {eta:e}");
        }
        let plain = lstsq_mixed_gpu(&g, &da, &db, &params).unwrap();
        assert!(plain.phases.is_none());
        assert_eq!(plain.x.to_host(&g).unwrap(), x);
        assert_eq!(plain.factor, sol.factor);
        // cuBLAS is back in host pointer mode: a host-mode DDOT gives the right value.
        let ones = DevMat::from_host(&g, Mat::<f64>::from_fn(7, 1, |_, _| 1.5).as_ref()).unwrap();
        let d = g.dot(&ones.col(0, 0..7), &ones.col(0, 0..7)).unwrap();
        assert_eq!(d, 7.0 * 2.25);
    }
}

/// κ = 1e10 is beyond both Gram factors (κ²·u_f64 ≈ 1e4: fl(AᵀA) is numerically
/// singular, so DPOTRF fails or the diagonal test — ratio ≳ 1/√u — rejects the factor):
/// the `Auto` route falls through the f32 and f64 Gram stages, the `GramF64` route
/// through the f64 one, and both end on the f32 QR and meet the tolerance 10·m·u. (At
/// κ = 1e8, κ²·u_f64 ≈ 1, the f64 Gram factor still worked on the H100 at 397×131:
/// 14 CG steps in 2 refinement steps, η 2.9e-18.)
#[test]
fn gram_stages_fall_through_to_the_qr() {
    let Some(g) = common::gpu() else { return };
    let mut rng = StdRng::seed_from_u64(50);
    let (m, n) = (397, 131);
    let u = f64::EPSILON / 2.0;
    let a = with_cond::<f64>(&mut rng, m, n, 1e10);
    let b = two_rhs(&mut rng, &a);
    let (da, db) = (
        DevMat::from_host(&g, a.as_ref()).unwrap(),
        DevMat::from_host(&g, b.as_ref()).unwrap(),
    );
    for route in [MixedRoute::Auto, MixedRoute::GramF64] {
        let params = MixedParams {
            route,
            ..MixedParams::default()
        };
        let sol = lstsq_mixed_gpu(&g, &da, &db, &params)
            .unwrap_or_else(|e| panic!("κ=1e10 {route:?}: {e}"));
        eprintln!(
            "κ=1e10 {route:?}: factor {:?}, {} steps, {} CG steps, η {:.2e}",
            sol.factor, sol.iterations, sol.inner_steps, sol.backward_error
        );
        assert_eq!(sol.factor, MixedFactor::Qr(GemmPrecision::F32), "{route:?}");
        let x = sol.x.to_host(&g).unwrap();
        for c in 0..2 {
            let eta = ls_backward_error(a.as_ref(), b.col(c), x.col(c));
            assert!(eta <= 10.0 * m as f64 * u, "{route:?} rhs {c}: η {eta:e}");
        }
    }
    assert_eq!(da.to_host(&g).unwrap(), a);
    assert_eq!(db.to_host(&g).unwrap(), b);
}

/// b = 0 gives x = 0 with η = 0 (h = 0: the inner solve stops before its first step);
/// n = 1 and n = 2 converge (CG ends in ≤ n steps, then stops or breaks down without
/// spoiling δ).
#[test]
fn degenerate_rhs_and_narrow_a() {
    let Some(g) = common::gpu() else { return };
    let mut rng = StdRng::seed_from_u64(49);
    let a = with_cond::<f64>(&mut rng, 97, 13, 1e3);
    let zero = Mat::<f64>::zeros(97, 1);
    for route in [MixedRoute::Auto, MixedRoute::GramF64, MixedRoute::Qr] {
        let params = MixedParams {
            route,
            ..MixedParams::default()
        };
        let sol = lstsq_mixed_gpu_host(&g, a.as_ref(), zero.as_ref(), &params).unwrap();
        assert_eq!(sol.backward_error, 0.0);
        assert!(sol.x.as_ref().col(0).iter().all(|&v| v == 0.0));
    }
    for n in [1usize, 2] {
        let a = Mat::<f64>::from_fn(53, n, |i, j| ((i * 7 + j * 3) % 11) as f64 - 4.5);
        let b = Mat::<f64>::from_fn(53, 2, |i, j| (i as f64 * 0.3 + j as f64).sin());
        for (p, route) in PRECS.iter().map(|&p| (p, MixedRoute::Qr)).chain([
            (GemmPrecision::F32, MixedRoute::Auto),
            (GemmPrecision::F32, MixedRoute::GramF64),
        ]) {
            let params = MixedParams {
                precision: p,
                route,
                ..MixedParams::default()
            };
            let sol = lstsq_mixed_gpu_host(&g, a.as_ref(), b.as_ref(), &params)
                .unwrap_or_else(|e| panic!("n={n} {p:?} {route:?}: {e}"));
            let xf = faer_lstsq(&a, &b);
            for c in 0..2 {
                let eta = ls_backward_error(a.as_ref(), b.col(c), sol.x.col(c));
                let eta_f = ls_backward_error(a.as_ref(), b.col(c), xf.col(c));
                assert!(
                    eta <= 10.0 * eta_f.max(1e-3 * f64::EPSILON),
                    "n={n} {p:?}: η {eta:e} vs faer {eta_f:e}"
                );
            }
        }
    }
}
