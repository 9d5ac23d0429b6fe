//! The thin-Q and R-only state kinds (`QPolicy::Thin`, `QPolicy::None` with and without
//! `FactorParams::keep_data`) of the CPU backend against faer's refactorisation of the
//! updated problem, built from scratch in f64 from the exact (widened) inputs.
//!
//! # Bounds (u = unit roundoff of the state's type, m, n the updated sizes)
//!
//! * x (least-squares perturbation bound, per right-hand side):
//!   ‖x̂ − x‖/‖x‖ ≤ c·u·κ(A)·(1 + κ(A)·‖r‖/(‖A‖‖x‖)), c = 100·n, κ and ‖A‖ from faer's
//!   singular values, x and r from faer's least-squares solution.
//! * residual norm: |ρ̂ − ρ| ≤ 2·(10·m·u)·(1 + 2κ)·‖b‖ (Golub–Van Loan 5.3.1 with the
//!   per-update backward error 10·m·u and a factor 2 for the reference).
//! * R: exactly zero below the diagonal; ‖RᵀR − AᵀA‖₂ ≤ 10·m·u·‖A‖₂²; R equal to faer's R up
//!   to row signs within Sun's first-order bound 2·√(2n)·κ·(10·m·u)·‖A‖₂ (Frobenius).
//! * Thin: ‖Q₁ᵀQ₁ − I‖₂ ≤ 10·m·u, ‖A − Q₁R‖₂/‖A‖₂ ≤ 10·m·u, ‖d − Q₁ᵀb‖/‖b‖ ≤ 10·m·u.
//!   Full: the same with the m×m Q and R at full height.
//!
//! Inputs are uniform(−1, 1) and never zero (except the deliberately structured ones of
//! the error-path tests); sizes are not multiples of 32.

mod common;

use common::{
    checked_factors, checked_q, normalise_row_signs, random_mat, random_vec, rng, singular_values,
    to_faer, typed_tests, Factors, Model, StateKind,
};
use cuqr::{CpuQr, Error, Mat, QrUpdate, Scalar};
use faer::linalg::solvers::SolveLstsq;
use rand::rngs::StdRng;
use rand::Rng;

/// Largest singular value (2-norm) of a faer matrix.
fn norm2(a: &faer::Mat<f64>) -> f64 {
    if a.nrows() == 0 || a.ncols() == 0 {
        return 0.0;
    }
    singular_values(a)[0]
}

fn fails(x: f64, tol: f64) -> bool {
    x.is_nan() || x > tol
}

/// What a check measured, each as a multiple of its bound.
#[derive(Clone, Copy, Debug, Default)]
struct Ratios {
    x: f64,
    res: f64,
    gram: f64,
    r: f64,
    orth: f64,
    back: f64,
}

/// The checks of the module doc; `Err` describes the first violated bound.
fn check<T: Scalar>(st: &CpuQr<T>, model: &Model) -> Result<Ratios, String> {
    let (m, n, q) = (model.m(), model.n(), model.q());
    let u = T::UNIT_ROUNDOFF;
    let eps = 10.0 * m as f64 * u;
    let mut out = Ratios::default();
    let Factors { r, d, full, .. } = checked_factors(st, model)?;

    // faer's reference
    let s = singular_values(&model.a);
    let (a_norm, kappa) = (s[0], s[0] / s[n - 1]);
    let fqr = model.a.qr();
    let x_ref = fqr.solve_lstsq(&model.b);
    let r_ref = normalise_row_signs(&fqr.R().to_owned(), n);
    let res_ref = &model.b - &model.a * &x_ref;

    // R: Gram matrix and rows up to signs
    let rn = faer::Mat::from_fn(n, n, |i, j| r[(i, j)].to_f64());
    let gram = rn.transpose() * &rn - model.a.transpose() * &model.a;
    let gram_err = norm2(&gram);
    let gram_tol = eps * a_norm * a_norm;
    out.gram = gram_err / gram_tol;
    if fails(gram_err, gram_tol) {
        return Err(format!(
            "‖RᵀR − AᵀA‖ = {gram_err:e} > 10·m·u·‖A‖² = {gram_tol:e} (κ = {kappa:.3e})"
        ));
    }
    let r_err = (&normalise_row_signs(&rn, n) - &r_ref).norm_l2();
    let r_tol = 2.0 * (2.0 * n as f64).sqrt() * kappa * eps * a_norm;
    out.r = r_err / r_tol;
    if fails(r_err, r_tol) {
        return Err(format!(
            "‖|R| − |R_faer|‖_F = {r_err:e} > 2√(2n)κ·10mu·‖A‖ = {r_tol:e} (κ = {kappa:.3e})"
        ));
    }

    // Q
    if let Some(qm) = checked_q(st, m, n)? {
        let cols = qm.ncols();
        let qf = to_faer(&qm);
        let orth = norm2(&(qf.transpose() * &qf - faer::Mat::<f64>::identity(cols, cols)));
        out.orth = orth / eps;
        if fails(orth, eps) {
            return Err(format!("‖QᵀQ − I‖ = {orth:e} > 10·m·u = {eps:e}"));
        }
        let rf = faer::Mat::from_fn(cols, n, |i, j| r[(i, j)].to_f64());
        let back = norm2(&(&model.a - &qf * &rf)) / a_norm;
        out.back = back / eps;
        if fails(back, eps) {
            return Err(format!("‖A − QR‖/‖A‖ = {back:e} > 10·m·u = {eps:e}"));
        }
        if !full {
            let df = faer::Mat::from_fn(n, q, |i, k| d[(i, k)].to_f64());
            let e_d = norm2(&(qf.transpose() * &model.b - &df)) / norm2(&model.b);
            if fails(e_d, eps) {
                return Err(format!("‖d − Q₁ᵀb‖/‖b‖ = {e_d:e} > 10·m·u = {eps:e}"));
            }
        }
    }

    // solution and residual norms
    let sol = st.solve().map_err(|e| format!("solve(): {e}"))?;
    if (sol.x.nrows(), sol.x.ncols()) != (n, q) || sol.residual_norms.len() != q {
        return Err("solution has the wrong shape".into());
    }
    let c = 100.0 * n as f64;
    for k in 0..q {
        let xn = (0..n).map(|i| x_ref[(i, k)].powi(2)).sum::<f64>().sqrt();
        let dx = (0..n)
            .map(|i| (sol.x[(i, k)].to_f64() - x_ref[(i, k)]).powi(2))
            .sum::<f64>()
            .sqrt();
        let rn = (0..m).map(|i| res_ref[(i, k)].powi(2)).sum::<f64>().sqrt();
        let bn = (0..m).map(|i| model.b[(i, k)].powi(2)).sum::<f64>().sqrt();
        let x_tol = c * u * kappa * (1.0 + kappa * rn / (a_norm * xn));
        let e_x = dx / xn;
        out.x = out.x.max(e_x / x_tol);
        if fails(e_x, x_tol) {
            return Err(format!(
                "rhs {k}: ‖Δx‖/‖x‖ = {e_x:e} > 100n·u·κ(1 + κ‖r‖/(‖A‖‖x‖)) = {x_tol:e} (κ = {kappa:.3e})"
            ));
        }
        let res_tol = 2.0 * eps * (1.0 + 2.0 * kappa) * bn;
        let dres = (sol.residual_norms[k] - rn).abs();
        out.res = out.res.max(dres / res_tol);
        if fails(dres, res_tol) {
            return Err(format!(
                "rhs {k}: residual {} vs faer {rn}: |Δ| = {dres:e} > {res_tol:e}",
                sol.residual_norms[k]
            ));
        }
    }
    Ok(out)
}

fn tname<T: Scalar>() -> &'static str {
    if T::UNIT_ROUNDOFF < 1e-10 {
        "f64"
    } else {
        "f32"
    }
}

// ---------------------------------------------------------------------------------------
// 1. every operation × kind × precision against faer
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Op {
    InsertCols { k0: usize, p: usize },
    DeleteCols { k0: usize, p: usize },
    InsertRows { k0: usize, p: usize },
    DeleteRows { k0: usize, p: usize },
    DeleteRowsWith { k0: usize, p: usize },
    RankOne,
}

fn ops_for(kind: StateKind, m: usize, n: usize) -> Vec<Op> {
    let mut v = Vec::new();
    for p in [1, 3] {
        if kind != StateKind::NoneBare {
            for k0 in [0, n / 2, n] {
                v.push(Op::InsertCols { k0, p });
            }
        }
        for k0 in [0, (n - p) / 2, n - p] {
            v.push(Op::DeleteCols { k0, p });
        }
    }
    for p in [1, 4] {
        for k0 in [0, m / 2, m] {
            v.push(Op::InsertRows { k0, p });
        }
        for k0 in [0, (m - p) / 2, m - p] {
            if kind != StateKind::NoneBare {
                v.push(Op::DeleteRows { k0, p });
            }
            v.push(Op::DeleteRowsWith { k0, p });
        }
    }
    if kind != StateKind::NoneBare {
        v.push(Op::RankOne);
    }
    v
}

/// Applies `op` to the state and the model (random inputs from `g`).
fn apply<T: Scalar>(
    st: &mut CpuQr<T>,
    model: &mut Model,
    op: Op,
    g: &mut StdRng,
) -> cuqr::Result<()> {
    let (m, n, q) = (model.m(), model.n(), model.q());
    match op {
        Op::InsertCols { k0, p } => {
            let u = random_mat::<T>(g, m, p);
            st.insert_cols(k0, u.as_ref())?;
            model.insert_cols(k0, &u);
        }
        Op::DeleteCols { k0, p } => {
            st.delete_cols(k0, p)?;
            model.delete_cols(k0, p);
        }
        Op::InsertRows { k0, p } => {
            let u = random_mat::<T>(g, p, n);
            let e = random_mat::<T>(g, p, q);
            st.insert_rows(k0, u.as_ref(), e.as_ref())?;
            model.insert_rows(k0, &u, &e);
        }
        Op::DeleteRows { k0, p } => {
            st.delete_rows(k0, p)?;
            model.delete_rows(k0, p);
        }
        Op::DeleteRowsWith { k0, p } => {
            // the true rows, rounded back to T exactly (they were T values)
            let rows = Mat::<T>::from_fn(p, n, |i, j| T::from_f64(model.a[(k0 + i, j)]));
            let rhs = Mat::<T>::from_fn(p, q, |i, k| T::from_f64(model.b[(k0 + i, k)]));
            st.delete_rows_with(k0, rows.as_ref(), rhs.as_ref())?;
            model.delete_rows(k0, p);
        }
        Op::RankOne => {
            let u = random_vec::<T>(g, m);
            let v = random_vec::<T>(g, n);
            st.rank_one(&u, &v)?;
            model.rank_one(&u, &v);
        }
    }
    Ok(())
}

fn every_op<T: Scalar>(seed0: u64) -> Vec<String> {
    let mut failures = Vec::new();
    let mut cases = 0;
    let mut worst = Ratios::default();
    for (si, &(m, n, q)) in [(97usize, 13usize, 2usize), (61, 7, 1)].iter().enumerate() {
        for (ki, kind) in [StateKind::Thin, StateKind::NoneKeep, StateKind::NoneBare]
            .into_iter()
            .enumerate()
        {
            for (oi, op) in ops_for(kind, m, n).into_iter().enumerate() {
                let seed = seed0 + 10_000 * si as u64 + 1000 * ki as u64 + oi as u64;
                let mut g = rng(seed);
                let a = random_mat::<T>(&mut g, m, n);
                let b = random_mat::<T>(&mut g, m, q);
                let mut model = Model::new(&a, &b);
                let mut st = kind.cpu(&a, &b);
                cases += 1;
                let tag = format!("{} {kind:?} {m}x{n} q={q} {op:?} seed={seed}", tname::<T>());
                if let Err(e) = apply(&mut st, &mut model, op, &mut g) {
                    failures.push(format!("{tag}: error {e}"));
                    continue;
                }
                match check(&st, &model) {
                    Ok(r) => {
                        worst.x = worst.x.max(r.x);
                        worst.res = worst.res.max(r.res);
                        worst.gram = worst.gram.max(r.gram);
                        worst.r = worst.r.max(r.r);
                        worst.orth = worst.orth.max(r.orth);
                        worst.back = worst.back.max(r.back);
                    }
                    Err(e) => failures.push(format!("{tag}: {e}")),
                }
            }
        }
    }
    eprintln!(
        "{}: {cases} cases, worst measured/bound: x {:.2e} res {:.2e} gram {:.2e} R {:.2e} orth {:.2e} back {:.2e}",
        tname::<T>(),
        worst.x,
        worst.res,
        worst.gram,
        worst.r,
        worst.orth,
        worst.back
    );
    failures
}

fn assert_none(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// [`every_op`] with no failure.
fn every_op_passes<T: Scalar>(seed0: u64) {
    assert_none(every_op::<T>(seed0));
}
typed_tests!(every_op_passes {
    every_op_matches_faer_f64: f64[1_000_001],
    every_op_matches_faer_f32: f32[2_000_001]
});

// ---------------------------------------------------------------------------------------
// 2. property sequences
// ---------------------------------------------------------------------------------------

/// 60 mixed random updates keeping m ≥ n + 3, n ≥ 2 (and m ≤ 140, n ≤ 24), then the
/// checks against a fresh faer factorisation of the tracked A, b.
fn sequence<T: Scalar>(kind: StateKind, seed: u64) -> Result<Ratios, String> {
    let mut g = rng(seed);
    let (m0, n0, q) = (61, 7, 2);
    let a = random_mat::<T>(&mut g, m0, n0);
    let b = random_mat::<T>(&mut g, m0, q);
    let mut model = Model::new(&a, &b);
    let mut st = kind.cpu(&a, &b);
    let mut log = Vec::new();
    let steps = 60;
    for step in 0..steps {
        let (m, n) = (model.m(), model.n());
        let op = loop {
            let p = g.random_range(1..=3usize);
            match g.random_range(0..5u32) {
                0 if n + p + 3 <= m && n + p <= 24 => {
                    break Op::InsertCols {
                        k0: g.random_range(0..=n),
                        p,
                    }
                }
                1 if n >= p + 2 => {
                    break Op::DeleteCols {
                        k0: g.random_range(0..=n - p),
                        p,
                    }
                }
                2 if m + p <= 140 => {
                    break Op::InsertRows {
                        k0: g.random_range(0..=m),
                        p,
                    }
                }
                3 if m >= n + 3 + p => {
                    break Op::DeleteRows {
                        k0: g.random_range(0..=m - p),
                        p,
                    }
                }
                4 => break Op::RankOne,
                _ => {}
            }
        };
        log.push(op);
        apply(&mut st, &mut model, op, &mut g)
            .map_err(|e| format!("step {step} {op:?}: {e} (ops so far: {log:?})"))?;
    }
    check(&st, &model).map_err(|e| {
        format!(
            "after {steps} updates (final {}x{}): {e}",
            model.m(),
            model.n()
        )
    })
}

fn sequences<T: Scalar>(seed0: u64) {
    let mut failures = Vec::new();
    for (ki, kind) in [StateKind::Thin, StateKind::NoneKeep, StateKind::Full]
        .into_iter()
        .enumerate()
    {
        let mut worst = Ratios::default();
        for rep in 0..4u64 {
            let seed = seed0 + 100 * ki as u64 + rep;
            match sequence::<T>(kind, seed) {
                Ok(r) => {
                    worst.x = worst.x.max(r.x);
                    worst.gram = worst.gram.max(r.gram);
                    worst.orth = worst.orth.max(r.orth);
                    worst.back = worst.back.max(r.back);
                }
                Err(e) => failures.push(format!("{} {kind:?} seed={seed}: {e}", tname::<T>())),
            }
        }
        eprintln!(
            "{} {kind:?}: 4 sequences of 60 updates, worst measured/bound: x {:.2e} gram {:.2e} orth {:.2e} back {:.2e}",
            tname::<T>(),
            worst.x,
            worst.gram,
            worst.orth,
            worst.back
        );
    }
    assert_none(failures);
}

typed_tests!(sequences {
    sequences_match_faer_f64: f64[3_000_001],
    sequences_match_faer_f32: f32[4_000_001]
});

// ---------------------------------------------------------------------------------------
// 3. error paths leave the state unchanged
// ---------------------------------------------------------------------------------------

/// Everything observable, bit for bit, including the solution.
fn observe<T: Scalar>(st: &CpuQr<T>) -> (common::Snapshot, Vec<u64>, Vec<u64>) {
    let sol = st.solve().expect("solve");
    (
        common::snapshot(st),
        sol.x
            .as_slice()
            .iter()
            .map(|x| x.to_f64().to_bits())
            .collect(),
        sol.residual_norms.iter().map(|x| x.to_bits()).collect(),
    )
}

/// Runs `f` expecting an error accepted by `want`, and the state unchanged.
fn expect_err<T: Scalar>(
    st: &mut CpuQr<T>,
    what: &str,
    want: impl Fn(&Error) -> bool,
    f: impl FnOnce(&mut CpuQr<T>) -> cuqr::Result<()>,
) -> Result<(), String> {
    let before = observe(st);
    let r = f(st);
    let after = observe(st);
    let res = match r {
        Ok(()) => {
            let r = st.r().expect("r");
            let rf = r.norm_fro();
            let (jmin, rmin) = (0..r.ncols())
                .map(|j| (j, r[(j, j)].to_f64().abs()))
                .fold((0, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
            return Err(format!(
                "{what}: succeeded, expected an error (afterwards min |R_jj| = {rmin:e} at j = {jmin}, \
                 |R_jj|/‖R‖_F = {:e})",
                rmin / rf
            ));
        }
        Err(e) if want(&e) => Ok(()),
        Err(e) => Err(format!("{what}: wrong error {e:?}")),
    };
    if before != after {
        return Err(format!("{what}: state changed ({res:?})"));
    }
    res
}

fn error_paths<T: Scalar>(seed: u64) {
    let mut failures = Vec::new();
    let mut push = |r: Result<(), String>| {
        if let Err(e) = r {
            failures.push(format!("{} seed={seed}: {e}", tname::<T>()));
        }
    };
    let mut g = rng(seed);
    let (m, n, q) = (61, 7, 2);
    let a = random_mat::<T>(&mut g, m, n);
    let b = random_mat::<T>(&mut g, m, q);

    // NeedsData without kept data
    let mut bare = StateKind::NoneBare.cpu(&a, &b);
    let u = random_mat::<T>(&mut g, m, 2);
    let needs = |e: &Error| matches!(e, Error::NeedsData { .. });
    push(expect_err(&mut bare, "bare insert_cols", needs, |s| {
        s.insert_cols(3, u.as_ref())
    }));
    let (uu, vv) = (random_vec::<T>(&mut g, m), random_vec::<T>(&mut g, n));
    push(expect_err(&mut bare, "bare rank_one", needs, |s| {
        s.rank_one(&uu, &vv)
    }));
    push(expect_err(&mut bare, "bare delete_rows", needs, |s| {
        s.delete_rows(5, 2)
    }));

    // a downdate that loses positive definiteness: column j is zero except in row i0
    let (j, i0) = (4, 17);
    let az = Mat::<T>::from_fn(m, n, |i, c| {
        if c == j && i != i0 {
            T::ZERO
        } else {
            a[(i, c)]
        }
    });
    let down = |e: &Error| matches!(e, Error::DowndateFailed { .. });
    for kind in [StateKind::Thin, StateKind::NoneKeep, StateKind::NoneBare] {
        let mut st = kind.cpu(&az, &b);
        let what = format!("{kind:?} delete the only row carrying column {j}");
        if kind == StateKind::NoneBare {
            let rows = Mat::<T>::from_fn(1, n, |_, c| az[(i0, c)]);
            let rhs = Mat::<T>::from_fn(1, q, |_, k| b[(i0, k)]);
            push(expect_err(&mut st, &what, down, |s| {
                s.delete_rows_with(i0, rows.as_ref(), rhs.as_ref())
            }));
        } else {
            push(expect_err(&mut st, &what, down, |s| s.delete_rows(i0, 1)));
            // the same through a block deletion containing the row
            push(expect_err(&mut st, &format!("{what} (block)"), down, |s| {
                s.delete_rows(i0 - 1, 3)
            }));
        }
    }

    // inserting a combination of existing columns
    let coef: Vec<f64> = (0..n).map(|_| g.random_range(0.5..1.5)).collect();
    let comb = Mat::<T>::from_fn(m, 1, |i, _| {
        T::from_f64((0..n).map(|c| coef[c] * a[(i, c)].to_f64()).sum())
    });
    let rank = |e: &Error| matches!(e, Error::RankDeficient { .. });
    for kind in [StateKind::Thin, StateKind::NoneKeep] {
        let mut st = kind.cpu(&a, &b);
        for k0 in [0, 3, n] {
            push(expect_err(
                &mut st,
                &format!("{kind:?} insert dependent column at {k0}"),
                rank,
                |s| s.insert_cols(k0, comb.as_ref()),
            ));
        }
    }

    // delete_rows_with shape errors, every kind
    let shape = |e: &Error| matches!(e, Error::Shape { .. });
    for kind in [
        StateKind::Full,
        StateKind::Thin,
        StateKind::NoneKeep,
        StateKind::NoneBare,
    ] {
        let mut st = kind.cpu(&a, &b);
        let p = 2;
        let good_rows = Mat::<T>::from_fn(p, n, |i, c| a[(10 + i, c)]);
        let good_rhs = Mat::<T>::from_fn(p, q, |i, k| b[(10 + i, k)]);
        let wide = Mat::<T>::from_fn(p, n + 1, |i, c| a[(10 + i, c % n)]);
        let narrow = Mat::<T>::from_fn(p, n - 1, |i, c| a[(10 + i, c)]);
        let rhs_cols = Mat::<T>::from_fn(p, q + 1, |i, k| b[(10 + i, k % q)]);
        let rhs_rows = Mat::<T>::from_fn(p + 1, q, |i, k| b[(10 + i, k)]);
        push(expect_err(
            &mut st,
            &format!("{kind:?} rows n+1 cols"),
            shape,
            |s| s.delete_rows_with(10, wide.as_ref(), good_rhs.as_ref()),
        ));
        push(expect_err(
            &mut st,
            &format!("{kind:?} rows n-1 cols"),
            shape,
            |s| s.delete_rows_with(10, narrow.as_ref(), good_rhs.as_ref()),
        ));
        push(expect_err(
            &mut st,
            &format!("{kind:?} rhs q+1 cols"),
            shape,
            |s| s.delete_rows_with(10, good_rows.as_ref(), rhs_cols.as_ref()),
        ));
        push(expect_err(
            &mut st,
            &format!("{kind:?} rhs p+1 rows"),
            shape,
            |s| s.delete_rows_with(10, good_rows.as_ref(), rhs_rows.as_ref()),
        ));
        // and the well-shaped call still works afterwards
        if let Err(e) = st.delete_rows_with(10, good_rows.as_ref(), good_rhs.as_ref()) {
            push(Err(format!("{kind:?} well-shaped delete_rows_with: {e}")));
        } else {
            let mut model = Model::new(&a, &b);
            model.delete_rows(10, p);
            push(
                check(&st, &model)
                    .map(|_| ())
                    .map_err(|e| format!("{kind:?} after: {e}")),
            );
        }
    }
    assert_none(failures);
}

typed_tests!(error_paths {
    error_paths_leave_state_f64: f64[5_000_001],
    error_paths_leave_state_f32: f32[6_000_001]
});

// ---------------------------------------------------------------------------------------
// 4. accuracy vs conditioning (f64, R-only with kept data)
// ---------------------------------------------------------------------------------------

/// An orthonormal m×k matrix: faer's Q of a random m×k matrix.
fn orthonormal(g: &mut StdRng, m: usize, k: usize) -> faer::Mat<f64> {
    let z = to_faer(&random_mat::<f64>(g, m, k));
    z.qr().compute_thin_Q()
}

/// U·diag(σ)·Vᵀ, σ log-spaced from 1 to 1/κ, rounded to f64.
fn with_condition(g: &mut StdRng, m: usize, n: usize, kappa: f64) -> Mat<f64> {
    let u = orthonormal(g, m, n);
    let v = orthonormal(g, n, n);
    let sigma: Vec<f64> = (0..n)
        .map(|i| kappa.powf(-(i as f64) / (n as f64 - 1.0)))
        .collect();
    let us = faer::Mat::from_fn(m, n, |i, j| u[(i, j)] * sigma[j]);
    let a = &us * v.transpose();
    Mat::from_fn(m, n, |i, j| a[(i, j)])
}

/// Per right-hand side: (κ of the result, ‖Δx‖/‖x‖, bound).
fn x_errors(st: &CpuQr<f64>, model: &Model) -> Vec<(f64, f64, f64)> {
    let (m, n, q) = (model.m(), model.n(), model.q());
    let s = singular_values(&model.a);
    let (a_norm, kappa) = (s[0], s[0] / s[n - 1]);
    let x_ref = model.a.qr().solve_lstsq(&model.b);
    let res = &model.b - &model.a * &x_ref;
    let sol = st.solve().unwrap();
    (0..q)
        .map(|k| {
            let xn = (0..n).map(|i| x_ref[(i, k)].powi(2)).sum::<f64>().sqrt();
            let dx = (0..n)
                .map(|i| (sol.x[(i, k)] - x_ref[(i, k)]).powi(2))
                .sum::<f64>()
                .sqrt();
            let rn = (0..m).map(|i| res[(i, k)].powi(2)).sum::<f64>().sqrt();
            let tol =
                100.0 * n as f64 * f64::UNIT_ROUNDOFF * kappa * (1.0 + kappa * rn / (a_norm * xn));
            (kappa, dx / xn, tol)
        })
        .collect()
}

/// ‖Δx‖/‖x‖ per rhs for the Full and Thin kinds given the same update as the R-only state
/// (inputs regenerated from `seed` exactly as in the test).
fn compare_kinds(
    op: &str,
    bmat: &Mat<f64>,
    b: &Mat<f64>,
    k0: usize,
    model: &Model,
    seed: u64,
) -> Vec<Vec<f64>> {
    let (m, n) = (bmat.nrows(), bmat.ncols());
    [StateKind::Full, StateKind::Thin]
        .into_iter()
        .map(|kind| {
            let st = if op == "insert_col" {
                let a = Mat::from_fn(m, n - 1, |i, j| bmat[(i, if j < k0 { j } else { j + 1 })]);
                let col = Mat::from_fn(m, 1, |i, _| bmat[(i, k0)]);
                let mut st = kind.cpu(&a, b);
                st.insert_cols(k0, col.as_ref()).expect("insert_cols");
                st
            } else {
                // regenerate u, v: same draws as the test after B, x0, noise, b0
                let mut g = rng(seed);
                let _ = with_condition(&mut g, m, n, 1.0);
                let _ = random_mat::<f64>(&mut g, n, 1);
                let _ = random_vec::<f64>(&mut g, m);
                let _ = random_vec::<f64>(&mut g, m);
                let u = random_vec::<f64>(&mut g, m);
                let v = random_vec::<f64>(&mut g, n);
                let a = Mat::from_fn(m, n, |i, j| bmat[(i, j)] - u[i] * v[j]);
                let mut st = kind.cpu(&a, b);
                st.rank_one(&u, &v).expect("rank_one");
                st
            };
            x_errors(&st, model).into_iter().map(|t| t.1).collect()
        })
        .collect()
}

#[test]
fn accuracy_vs_conditioning_none_keep_data_f64() {
    let (m, n) = (97, 13);
    let mut failures = Vec::new();
    eprintln!("op          κ target  κ(result)  rhs  ‖Δx‖/‖x‖   bound      ratio       (same update, ratio: Full, Thin)");
    for (ci, kappa) in [1e2, 1e6, 1e10].into_iter().enumerate() {
        for op in ["insert_col", "rank_one"] {
            let seed = 7_000_001 + 10 * ci as u64 + (op == "rank_one") as u64;
            let mut g = rng(seed);
            // the result has the target conditioning: B = UΣVᵀ (n columns)
            let bmat = with_condition(&mut g, m, n, kappa);
            // rhs 0: random b (large residual); rhs 1: b = B·x0 + 1e-8·noise (small residual)
            let x0 = random_mat::<f64>(&mut g, n, 1);
            let bx = bmat.matmul(&x0);
            let noise = random_vec::<f64>(&mut g, m);
            let b0 = random_vec::<f64>(&mut g, m);
            let b = Mat::from_fn(m, 2, |i, k| {
                if k == 0 {
                    b0[i]
                } else {
                    bx[(i, 0)] + 1e-8 * noise[i]
                }
            });
            let (st, model) = if op == "insert_col" {
                // factorise B without column k0, insert it back
                let k0 = n / 2;
                let a = Mat::from_fn(m, n - 1, |i, j| bmat[(i, if j < k0 { j } else { j + 1 })]);
                let col = Mat::from_fn(m, 1, |i, _| bmat[(i, k0)]);
                let mut model = Model::new(&a, &b);
                let mut st = StateKind::NoneKeep.cpu(&a, &b);
                match st.insert_cols(k0, col.as_ref()) {
                    Ok(()) => model.insert_cols(k0, &col),
                    Err(e) => {
                        failures.push(format!("κ={kappa:e} {op}: {e}"));
                        continue;
                    }
                }
                (st, model)
            } else {
                // factorise A = B − u vᵀ, then rank_one(u, v)
                let u = random_vec::<f64>(&mut g, m);
                let v = random_vec::<f64>(&mut g, n);
                let a = Mat::from_fn(m, n, |i, j| bmat[(i, j)] - u[i] * v[j]);
                let mut model = Model::new(&a, &b);
                let mut st = StateKind::NoneKeep.cpu(&a, &b);
                match st.rank_one(&u, &v) {
                    Ok(()) => model.rank_one(&u, &v),
                    Err(e) => {
                        failures.push(format!("κ={kappa:e} {op}: {e}"));
                        continue;
                    }
                }
                (st, model)
            };
            // the same update on the Full and Thin kinds, for comparison (printed only)
            let others = compare_kinds(op, &bmat, &b, n / 2, &model, seed);
            for (k, (kr, ex, tol)) in x_errors(&st, &model).into_iter().enumerate() {
                eprintln!(
                    "{op:<11} {kappa:>8.0e}  {kr:>9.3e}  {k:>3}  {ex:>9.3e}  {tol:>9.3e}  {:>9.3e}   Full {:>9.3e}  Thin {:>9.3e}",
                    ex / tol,
                    others[0][k] / tol,
                    others[1][k] / tol
                );
                // Beyond κ = u^(−1/2) the semi-normal equations behind the R-only rank-one
                // update cannot resolve a change with a large part outside range(A): that
                // limit is documented (docs/algorithms.md#updates-without-q) and printed here,
                // not asserted; column insertion holds the bound at every κ.
                let documented_limit = op == "rank_one" && kappa * kappa * f64::EPSILON > 1.0;
                if fails(ex, tol) && !documented_limit {
                    failures.push(format!(
                        "κ={kappa:e} (actual {kr:.3e}) {op} rhs {k}: ‖Δx‖/‖x‖ = {ex:e} > bound {tol:e} (seed {seed})"
                    ));
                }
            }
        }
    }
    assert_none(failures);
}

// ---------------------------------------------------------------------------------------
// 5. memory follows the kind
// ---------------------------------------------------------------------------------------

fn shapes<T: Scalar>(seed: u64) {
    let mut g = rng(seed);
    let (m, n, q) = (61, 7, 3);
    let a = random_mat::<T>(&mut g, m, n);
    let b = random_mat::<T>(&mut g, m, q);
    for kind in [
        StateKind::Full,
        StateKind::Thin,
        StateKind::NoneKeep,
        StateKind::NoneBare,
    ] {
        let mut st = kind.cpu(&a, &b);
        for stage in 0..3 {
            let (m, n) = (st.nrows(), st.ncols());
            let qm = st.q().unwrap().map(|q| (q.nrows(), q.ncols()));
            let r = st.r().unwrap();
            let d = st.d().unwrap();
            let (want_q, rows) = match kind {
                StateKind::Full => (Some((m, m)), m),
                StateKind::Thin => (Some((m, n)), n),
                StateKind::NoneKeep | StateKind::NoneBare => (None, n),
            };
            assert_eq!(qm, want_q, "{} {kind:?} stage {stage}: q()", tname::<T>());
            assert_eq!(
                (r.nrows(), r.ncols()),
                (rows, n),
                "{kind:?} stage {stage}: r()"
            );
            assert_eq!(
                (d.nrows(), d.ncols()),
                (rows, q),
                "{kind:?} stage {stage}: d()"
            );
            assert_eq!(st.q_policy(), kind.policy());
            match stage {
                0 => {
                    let u = random_mat::<T>(&mut g, 5, n);
                    let e = random_mat::<T>(&mut g, 5, q);
                    st.insert_rows(11, u.as_ref(), e.as_ref()).unwrap();
                }
                1 => st.delete_cols(2, 2).unwrap(),
                _ => {}
            }
        }
        assert_eq!((st.nrows(), st.ncols()), (m + 5, n - 2));
    }
}

typed_tests!(shapes {
    memory_follows_kind_f64: f64[8_000_001],
    memory_follows_kind_f32: f32[8_000_002]
});
