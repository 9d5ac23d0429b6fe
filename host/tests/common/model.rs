//! The dense f64 model of the updated problem (Ã, b̃) and the accuracy checks of
//! docs/algorithms.md#accuracy-measures, computed independently of the crate under test
//! (all norms in f64 through faer); every backend's tests check against it.
//!
//! # Tolerances (stated once, used everywhere)
//!
//! With u the unit roundoff of the state's scalar type and m the current row
//! count, let ε = 10·m·u: the per-update acceptance target
//! (docs/algorithms.md#accuracy-measures) for
//! e_Q = ‖Q̃ᵀQ̃ − I‖₂ and e_A = ‖Q̃R̃ − Ã‖₂/‖Ã‖₂. Since e_A is the backward error
//! of the factorisation, first-order perturbation theory turns ε into bounds on
//! everything else; each bound below carries a factor 2 so that it also covers
//! the reference's own error (faer in f64, whose backward error is below ε):
//!
//! * R (unique up to row signs for full-rank Ã; Sun's first-order bound
//!   ‖ΔR‖_F ≤ √2·κ₂·‖ΔA‖_F/‖A‖₂·‖R‖₂, with ‖ΔA‖_F ≤ √n·‖ΔA‖₂):
//!   ‖R̂ − R_ref‖_F ≤ 2·√(2n)·κ₂·ε·‖Ã‖₂ after normalising each row's sign by its diagonal.
//! * x (Golub–Van Loan Thm 5.3.1, sin θ = ‖r‖/‖b‖):
//!   ‖x̂ − x‖/‖x‖ ≤ 2·ε·(2κ₂/cos θ + tan θ·κ₂²).
//! * residual norm (same theorem): |ρ̂ − ρ| ≤ 2·ε·(1 + 2κ₂)·‖b‖.
//! * [R̃ d̃] carries the same rotations as R̃, so the augmented backward error
//!   ‖Q̃[R̃ d̃] − [Ã b̃]‖₂/‖[Ã b̃]‖₂ ≤ ε as well.
//! * ‖L‖ (strictly lower part of R̃) = 0 exactly.
//!
//! Random matrices have uniform(−1, 1) entries (never exactly zero) and the
//! tests keep m ≥ n + 2 except where stated, so κ₂ stays modest.
use cuqr::{Mat, MatRef, QPolicy, QrUpdate, Scalar};
use faer::linalg::solvers::SolveLstsq;

/// Exact widening of a cuqr matrix to a faer f64 matrix.
pub fn to_faer<T: Scalar>(a: &Mat<T>) -> faer::Mat<f64> {
    faer::Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64())
}

/// Exact widening of a cuqr view to a faer f64 matrix.
pub fn ref_to_faer<T: Scalar>(a: MatRef<'_, T>) -> faer::Mat<f64> {
    faer::Mat::from_fn(a.nrows(), a.ncols(), |i, j| a.get(i, j).to_f64())
}

/// The dense model of the current problem: Ã (m×n) and b̃ (m×q) in f64.
/// Every input is a `T` value widened exactly, so the model is the exact
/// matrix the state represents (rank-one products of two `T` values are exact
/// in f64; their sum rounds at 2⁻⁵³, far below any tolerance used here).
///
/// It also keeps the most rows and the largest ‖Ã‖₂ the problem has had before a step
/// that shrank it (rows or columns deleted, a rank-one change): rounding errors of the
/// steps made at that size stay in the factors, so the bounds of the module doc take
/// ε = 10·m_peak·u and ‖A‖_peak (see [`Model::peak`]); an R-only state's row deletion
/// downdates R, whose error grows by ‖A‖_peak/‖A‖ more (Stewart's downdating bound), so its
/// R is held to ‖A‖_peak²/‖A‖.
#[derive(Clone, Debug)]
pub struct Model {
    /// Ã.
    pub a: faer::Mat<f64>,
    /// b̃.
    pub b: faer::Mat<f64>,
    /// The most rows and the largest ‖Ã‖₂ seen before a shrinking step (0 before any).
    peak: (usize, f64),
}

impl Model {
    /// The model of `factorize(a, b)`.
    pub fn new<T: Scalar>(a: &Mat<T>, b: &Mat<T>) -> Self {
        Self {
            a: to_faer(a),
            b: to_faer(b),
            peak: (0, 0.0),
        }
    }
    /// The most rows and the largest ‖Ã‖₂ the problem has had, given the current ‖Ã‖₂.
    pub fn peak(&self, a_norm: f64) -> (usize, f64) {
        (self.peak.0.max(self.m()), self.peak.1.max(a_norm))
    }
    /// Records the current size before a step that may shrink the problem.
    fn note_peak(&mut self) {
        let now = if self.a.nrows() == 0 || self.a.ncols() == 0 {
            0.0
        } else {
            singular_values(&self.a)[0]
        };
        self.peak = self.peak(now);
    }
    /// Rows m.
    pub fn m(&self) -> usize {
        self.a.nrows()
    }
    /// Columns n.
    pub fn n(&self) -> usize {
        self.a.ncols()
    }
    /// Right-hand sides q.
    pub fn q(&self) -> usize {
        self.b.ncols()
    }
    /// U's columns become columns k0..k0+p.
    pub fn insert_cols<T: Scalar>(&mut self, k0: usize, u: &Mat<T>) {
        let p = u.ncols();
        let a = &self.a;
        self.a = faer::Mat::from_fn(a.nrows(), a.ncols() + p, |i, j| {
            if j < k0 {
                a[(i, j)]
            } else if j < k0 + p {
                u[(i, j - k0)].to_f64()
            } else {
                a[(i, j - p)]
            }
        });
    }
    /// Columns k0..k0+p are removed.
    pub fn delete_cols(&mut self, k0: usize, p: usize) {
        self.note_peak();
        let a = &self.a;
        self.a = faer::Mat::from_fn(a.nrows(), a.ncols() - p, |i, j| {
            if j < k0 {
                a[(i, j)]
            } else {
                a[(i, j + p)]
            }
        });
    }
    /// U's rows (and e's rows in b) become rows k0..k0+p.
    pub fn insert_rows<T: Scalar>(&mut self, k0: usize, u: &Mat<T>, e: &Mat<T>) {
        let p = u.nrows();
        let ins = |old: &faer::Mat<f64>, new: &Mat<T>| {
            faer::Mat::from_fn(old.nrows() + p, old.ncols(), |i, j| {
                if i < k0 {
                    old[(i, j)]
                } else if i < k0 + p {
                    new[(i - k0, j)].to_f64()
                } else {
                    old[(i - p, j)]
                }
            })
        };
        self.a = ins(&self.a, u);
        self.b = ins(&self.b, e);
    }
    /// Rows k0..k0+p are removed (from both Ã and b̃).
    pub fn delete_rows(&mut self, k0: usize, p: usize) {
        self.note_peak();
        let del = |old: &faer::Mat<f64>| {
            faer::Mat::from_fn(old.nrows() - p, old.ncols(), |i, j| {
                if i < k0 {
                    old[(i, j)]
                } else {
                    old[(i + p, j)]
                }
            })
        };
        self.a = del(&self.a);
        self.b = del(&self.b);
    }
    /// Ã ← Ã + u vᵀ.
    pub fn rank_one<T: Scalar>(&mut self, u: &[T], v: &[T]) {
        self.note_peak();
        let a = &self.a;
        self.a = faer::Mat::from_fn(a.nrows(), a.ncols(), |i, j| {
            a[(i, j)] + u[i].to_f64() * v[j].to_f64()
        });
    }
}

/// `x > tol`, or x is NaN (a NaN measure must fail a check, never pass it).
pub fn exceeds(x: f64, tol: f64) -> bool {
    x.is_nan() || x > tol
}

/// Singular values of `a`, nonincreasing.
pub fn singular_values(a: &faer::Mat<f64>) -> Vec<f64> {
    a.singular_values().unwrap()
}

/// ‖a‖₂: Frobenius norm first (an upper bound), the exact 2-norm from the SVD
/// only when asked for it or when the cheap bound is above `cheap_below`.
pub fn norm2_upto(a: &faer::Mat<f64>, cheap_below: f64) -> f64 {
    let f = a.norm_l2();
    if !f.is_finite() || f <= cheap_below || a.nrows() == 0 || a.ncols() == 0 {
        return f;
    }
    singular_values(a)[0]
}

/// Everything the checks compare against: faer's QR and least-squares solution
/// of the model, computed from scratch in f64.
pub struct Reference {
    /// n×n R from faer, rows normalised so the diagonal is positive.
    pub r: faer::Mat<f64>,
    /// n×q least-squares solution.
    pub x: faer::Mat<f64>,
    /// ‖b_j − Ã x_j‖₂ per right-hand side.
    pub res: Vec<f64>,
    /// ‖b_j‖₂ per right-hand side.
    pub b_norm: Vec<f64>,
    /// κ₂(Ã) = σ_max/σ_min.
    pub kappa: f64,
    /// ‖Ã‖₂ = σ_max.
    pub a_norm: f64,
}

/// Flips the sign of each row i of the leading n×n block so that R_ii ≥ 0.
pub fn normalise_row_signs(r: &faer::Mat<f64>, n: usize) -> faer::Mat<f64> {
    faer::Mat::from_fn(n, n, |i, j| {
        if r[(i, i)] < 0.0 {
            -r[(i, j)]
        } else {
            r[(i, j)]
        }
    })
}

impl Reference {
    /// faer's QR and solution of the model.
    pub fn of(model: &Model) -> Self {
        let (m, n, q) = (model.m(), model.n(), model.q());
        let qr = model.a.qr();
        let r = normalise_row_signs(&qr.R().to_owned(), n);
        let x = qr.solve_lstsq(&model.b);
        let ax = &model.a * &x;
        let res = (0..q)
            .map(|j| {
                (0..m)
                    .map(|i| (model.b[(i, j)] - ax[(i, j)]).powi(2))
                    .sum::<f64>()
                    .sqrt()
            })
            .collect();
        let b_norm = (0..q)
            .map(|j| (0..m).map(|i| model.b[(i, j)].powi(2)).sum::<f64>().sqrt())
            .collect();
        let s = singular_values(&model.a);
        Self {
            r,
            x,
            res,
            b_norm,
            kappa: s[0] / s[n - 1],
            a_norm: s[0],
        }
    }
}

/// ε = 10·m·u, the docs/algorithms.md#accuracy-measures per-update target for the state's type.
pub fn eps<T: Scalar>(m: usize) -> f64 {
    10.0 * m as f64 * T::UNIT_ROUNDOFF
}

/// What the checks measured (for reports).
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    /// e_Q in units of ε (None without Q).
    pub e_q: Option<f64>,
    /// e_A in units of ε (None without Q).
    pub e_a: Option<f64>,
    /// R error in units of its tolerance.
    pub r_err: f64,
    /// worst e_x in units of its tolerance.
    pub x_err: f64,
}

/// A state's R and d, their shapes checked.
pub struct Factors<T: Scalar> {
    /// R: m×n under the full Q policy, n×n otherwise.
    pub r: Mat<T>,
    /// d: R's rows × q.
    pub d: Mat<T>,
    /// Whether the state holds the full m×m Q.
    pub full: bool,
    /// R's rows (m with the full Q, n otherwise).
    pub rows: usize,
}

/// The state's dimensions against the model's, R's and d's shapes (m×n with the full Q,
/// n×n for the thin and R-only kinds) and R exactly zero strictly below the diagonal.
pub fn checked_factors<T: Scalar>(
    state: &dyn QrUpdate<T>,
    model: &Model,
) -> Result<Factors<T>, String> {
    let (m, n, q) = (model.m(), model.n(), model.q());
    if (state.nrows(), state.ncols(), state.nrhs()) != (m, n, q) {
        return Err(format!(
            "dims (m, n, q) = {:?}, model has {:?}",
            (state.nrows(), state.ncols(), state.nrhs()),
            (m, n, q)
        ));
    }
    let full = state.q_policy() == QPolicy::Full;
    let rows = if full { m } else { n };
    let r = state.r().map_err(|e| format!("r(): {e}"))?;
    if (r.nrows(), r.ncols()) != (rows, n) {
        return Err(format!(
            "R is {}x{}, expected {rows}x{n}",
            r.nrows(),
            r.ncols()
        ));
    }
    for j in 0..n {
        for i in j + 1..rows {
            if r[(i, j)] != T::ZERO {
                return Err(format!("L != 0: R[{i},{j}] = {:e}", r[(i, j)]));
            }
        }
    }
    let d = state.d().map_err(|e| format!("d(): {e}"))?;
    if (d.nrows(), d.ncols()) != (rows, q) {
        return Err(format!(
            "d is {}x{}, expected {rows}x{q}",
            d.nrows(),
            d.ncols()
        ));
    }
    Ok(Factors { r, d, full, rows })
}

/// The state's Q when its policy holds one (none under `QPolicy::None`), checked to be
/// m×m under the full policy and m×n under the thin one.
pub fn checked_q<T: Scalar>(
    state: &dyn QrUpdate<T>,
    m: usize,
    n: usize,
) -> Result<Option<Mat<T>>, String> {
    let qm = state.q().map_err(|e| format!("q(): {e}"))?;
    match (state.q_policy(), qm) {
        (QPolicy::None, None) => Ok(None),
        (QPolicy::None, Some(_)) => Err("q() is Some under QPolicy::None".into()),
        (_, None) => Err("q() is None under a Q-ful policy".into()),
        (policy, Some(qm)) => {
            let cols = if policy == QPolicy::Full { m } else { n };
            if (qm.nrows(), qm.ncols()) != (m, cols) {
                return Err(format!(
                    "Q is {}x{}, expected {m}x{cols}",
                    qm.nrows(),
                    qm.ncols()
                ));
            }
            Ok(Some(qm))
        }
    }
}

/// Checks `state` against `model` (see the module doc for every bound):
/// dimensions, ‖L‖ = 0 exactly, e_Q, e_A and the augmented e_A when Q is held,
/// R against faer up to row signs, x and residual norms against faer.
pub fn check_state<T: Scalar>(state: &dyn QrUpdate<T>, model: &Model) -> Result<Measured, String> {
    check_state_scaled(state, model, 1.0)
}

/// [`check_state`] for a state built from `scale`·(the model's inputs), with
/// `scale` a power of two so that scaling is exact: R̃, d̃ and the residual
/// norms are divided by `scale` (exactly, in f64) before the checks; Q̃ and x
/// do not change under scaling.
pub fn check_state_scaled<T: Scalar>(
    state: &dyn QrUpdate<T>,
    model: &Model,
    scale: f64,
) -> Result<Measured, String> {
    assert!(
        scale > 0.0 && scale.log2().fract() == 0.0,
        "scale must be a power of two"
    );
    let (m, n, q) = (model.m(), model.n(), model.q());
    let Factors { r, d, full, rows } = checked_factors(state, model)?;
    let refc = Reference::of(model);
    let (m_peak, _) = model.peak(refc.a_norm);
    let eps = eps::<T>(m_peak);
    let mut out = Measured::default();
    // R at full height (zero rows below a thin or R-only state's n×n R)
    let rf = faer::Mat::from_fn(m, n, |i, j| {
        if i < rows {
            r[(i, j)].to_f64() / scale
        } else {
            0.0
        }
    });

    // Q: orthogonality and backward errors, when held.
    if let Some(qm) = checked_q(state, m, n)? {
        let cols = qm.ncols();
        let qf = to_faer(&qm);
        let rf = faer::Mat::from_fn(cols, n, |i, j| rf[(i, j)]);
        let qtq = qf.transpose() * &qf - faer::Mat::<f64>::identity(cols, cols);
        let e_q = norm2_upto(&qtq, eps);
        out.e_q = Some(e_q / eps);
        if exceeds(e_q, eps) {
            return Err(format!("e_Q = {e_q:e} > 10·m·u = {eps:e}"));
        }
        let qr_a = &qf * &rf - &model.a;
        let e_a = norm2_upto(&qr_a, eps * refc.a_norm) / refc.a_norm;
        out.e_a = Some(e_a / eps);
        if exceeds(e_a, eps) {
            return Err(format!("e_A = {e_a:e} > 10·m·u = {eps:e}"));
        }
        let ab = faer::Mat::from_fn(m, n + q, |i, j| {
            if j < n {
                model.a[(i, j)]
            } else {
                model.b[(i, j - n)]
            }
        });
        if !full {
            // Q₁ spans A only: d = Q₁ᵀb instead of Q[R d] = [A b]
            let qtb = qf.transpose() * &model.b;
            let df = faer::Mat::from_fn(n, q, |i, k| d[(i, k)].to_f64() / scale);
            let b_norm = singular_values(&model.b)[0].max(f64::MIN_POSITIVE);
            let e_d = (&qtb - &df).norm_l2() / b_norm;
            if exceeds(e_d, eps) {
                return Err(format!("‖d − Q₁ᵀb‖/‖b‖ = {e_d:e} > 10·m·u = {eps:e}"));
            }
            return check_r_and_solution(state, model, scale, &rf_full(&rf, m), &refc, eps, out);
        }
        let rd = faer::Mat::from_fn(m, n + q, |i, j| {
            if j < n {
                rf[(i, j)]
            } else {
                d[(i, j - n)].to_f64() / scale
            }
        });
        let ab_norm = singular_values(&ab)[0];
        let e_ab = norm2_upto(&(&qf * &rd - &ab), eps * ab_norm) / ab_norm;
        if exceeds(e_ab, eps) {
            return Err(format!(
                "augmented e_A = ‖Q[R d] − [A b]‖/‖[A b]‖ = {e_ab:e} > 10·m·u = {eps:e}"
            ));
        }
    }

    check_r_and_solution(state, model, scale, &rf, &refc, eps, out)
}

/// An n×n R at full height (m rows).
fn rf_full(rf: &faer::Mat<f64>, m: usize) -> faer::Mat<f64> {
    faer::Mat::from_fn(
        m,
        rf.ncols(),
        |i, j| if i < rf.nrows() { rf[(i, j)] } else { 0.0 },
    )
}

/// The checks of R against faer and of the solution and residuals.
fn check_r_and_solution<T: Scalar>(
    state: &dyn QrUpdate<T>,
    model: &Model,
    scale: f64,
    rf: &faer::Mat<f64>,
    refc: &Reference,
    eps: f64,
    mut out: Measured,
) -> Result<Measured, String> {
    let (n, q) = (model.n(), model.q());
    // R against faer, up to row signs.
    let r_norm = normalise_row_signs(rf, n);
    let r_diff = (&r_norm - &refc.r).norm_l2();
    // ‖A‖ of the bound: the peak, or for a downdated R (R-only kind) the peak² / ‖A‖.
    let (_, a_peak) = model.peak(refc.a_norm);
    let a_bound = if state.q_policy() == QPolicy::None && refc.a_norm > 0.0 {
        a_peak * a_peak / refc.a_norm
    } else {
        a_peak
    };
    let r_tol = 2.0 * (2.0 * n as f64).sqrt() * refc.kappa * eps * a_bound;
    out.r_err = r_diff / r_tol;
    if exceeds(r_diff, r_tol) {
        return Err(format!(
            "‖R − R_faer‖_F = {r_diff:e} > 2·√(2n)·κ·ε·‖A‖ = {r_tol:e} (κ = {:.3e}, ‖A‖ = {a_bound:e})",
            refc.kappa
        ));
    }

    // Solution and residual against faer.
    let sol = state.solve().map_err(|e| format!("solve(): {e}"))?;
    if (sol.x.nrows(), sol.x.ncols()) != (n, q) || sol.residual_norms.len() != q {
        return Err(format!(
            "solution is {}x{} with {} residuals, expected {n}x{q} with {q}",
            sol.x.nrows(),
            sol.x.ncols(),
            sol.residual_norms.len()
        ));
    }
    let k = refc.kappa;
    for j in 0..q {
        let xn = (0..n).map(|i| refc.x[(i, j)].powi(2)).sum::<f64>().sqrt();
        let dx = (0..n)
            .map(|i| (sol.x[(i, j)].to_f64() - refc.x[(i, j)]).powi(2))
            .sum::<f64>()
            .sqrt();
        let sin_t = (refc.res[j] / refc.b_norm[j]).min(1.0);
        let cos_t = (1.0 - sin_t * sin_t).sqrt();
        let x_tol = 2.0 * eps * (2.0 * k / cos_t + sin_t / cos_t * k * k);
        let e_x = dx / xn;
        out.x_err = out.x_err.max(e_x / x_tol);
        if exceeds(e_x, x_tol) {
            return Err(format!(
                "rhs {j}: e_x = {e_x:e} > 2ε(2κ/cosθ + tanθ·κ²) = {x_tol:e} (κ = {k:.3e}, sinθ = {sin_t:.3})"
            ));
        }
        let res_tol = 2.0 * eps * (1.0 + 2.0 * k) * refc.b_norm[j];
        let dres = (sol.residual_norms[j] / scale - refc.res[j]).abs();
        if exceeds(dres, res_tol) {
            return Err(format!(
                "rhs {j}: residual {} vs faer {}: |Δ| = {dres:e} > 2ε(1+2κ)‖b‖ = {res_tol:e}",
                sol.residual_norms[j] / scale,
                refc.res[j]
            ));
        }
    }
    Ok(out)
}

/// R (n×n leading block) compared with `r_ref` up to row signs, with the R
/// tolerance of the module doc for the matrix `a`.
pub fn check_r_matches<T: Scalar>(
    r: &Mat<T>,
    r_ref: &Mat<T>,
    a: &faer::Mat<f64>,
) -> Result<(), String> {
    let (m, n) = (a.nrows(), a.ncols());
    let s = singular_values(a);
    let (kappa, a_norm) = (s[0] / s[n - 1], s[0]);
    let eps = eps::<T>(m);
    let d =
        (&normalise_row_signs(&to_faer(r), n) - &normalise_row_signs(&to_faer(r_ref), n)).norm_l2();
    let tol = 2.0 * (2.0 * n as f64).sqrt() * kappa * eps * a_norm;
    if exceeds(d, tol) {
        return Err(format!("‖R − R_ref‖_F = {d:e} > {tol:e} (κ = {kappa:.3e})"));
    }
    Ok(())
}

/// Bit patterns of a matrix (exact widening keeps every bit of f32 and f64).
pub fn bits<T: Scalar>(a: &Mat<T>) -> (usize, usize, Vec<u64>) {
    (
        a.nrows(),
        a.ncols(),
        a.as_slice().iter().map(|x| x.to_f64().to_bits()).collect(),
    )
}

/// Everything observable about a state, bit for bit.
#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot {
    dims: (usize, usize, usize),
    r: (usize, usize, Vec<u64>),
    d: (usize, usize, Vec<u64>),
    q: Option<(usize, usize, Vec<u64>)>,
}

/// Takes a [`Snapshot`] of `state`.
pub fn snapshot<T: Scalar>(state: &dyn QrUpdate<T>) -> Snapshot {
    Snapshot {
        dims: (state.nrows(), state.ncols(), state.nrhs()),
        r: bits(&state.r().unwrap()),
        d: bits(&state.d().unwrap()),
        q: state.q().unwrap().as_ref().map(bits),
    }
}
