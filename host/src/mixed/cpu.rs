//! CPU emulation of the mixed-precision block QR (docs/algorithms.md#mixed-precision) and the
//! refined
//! least-squares solver (module doc of `mixed`). Panels by `house`
//! (docs/algorithms.md#householder-vectors), T by `larft`
//! (docs/algorithms.md#blocked-reflectors) in the working precision; the three GEMMs of each block
//! application round their inputs to the chosen [`GemmPrecision`] and accumulate in f32.
#![forbid(unsafe_code)]

use super::{GemmPrecision, MixedParams};
use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::base::scalar::Scalar;
use crate::cpu::wy::{factor_panel, larft, resolve_block_size, zero_below_diagonal};

const OP_QR: &str = "mixed_qr";
const OP_LS: &str = "lstsq_mixed";
/// Backward-error target of each inner (correction) solve: the outer step then shrinks
/// the backward error by about this factor, so 2–3 steps reach f64's u.
pub(super) const INNER_EPS: f64 = 1e-8;

/// A GEMM operand rounded to the low precision: value ≈ `data[i + j·rows] · unscale`.
struct Low {
    rows: usize,
    data: Vec<f32>,
    /// Power of two undoing the pre-scaling (1 unless the format's range needs it).
    unscale: f64,
}

impl Low {
    /// Rounds a column-major f64 matrix (`rows` rows) to `p`, pre-scaling it by a power
    /// of two when the format's range requires it: always for f16 (largest entry into
    /// [2¹⁴, 2¹⁵)), for bf16/tf32 only when the largest entry is outside 2^±100.
    fn new(x: &[f64], rows: usize, p: GemmPrecision) -> Self {
        let amax = x.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let e = if amax > 0.0 {
            amax.log2().floor() as i32
        } else {
            0
        };
        let shift = match p {
            GemmPrecision::F16 => 14 - e,
            _ if !(-100..=100).contains(&e) => -e,
            _ => 0,
        };
        let scale = 2f64.powi(shift);
        Self {
            rows,
            data: x.iter().map(|&v| p.round(v * scale)).collect(),
            unscale: 2f64.powi(-shift),
        }
    }
    #[inline(always)]
    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i + j * self.rows]
    }
}

/// op(A)·B with f32 accumulation (fused multiply-add; the products of low-precision
/// inputs are exact in f32), the result scaled back and returned column-major in f64.
/// `ta`: A is transposed. Sizes: op(A) is r×k, B is k×c.
fn gemm_low(a: &Low, ta: bool, b: &Low, r: usize, k: usize, c: usize) -> Vec<f64> {
    let unscale = a.unscale * b.unscale;
    let mut out = vec![0.0f64; r * c];
    for j in 0..c {
        for i in 0..r {
            let mut acc = 0.0f32;
            for l in 0..k {
                let av = if ta { a.at(l, i) } else { a.at(i, l) };
                acc = av.mul_add(b.at(l, j), acc);
            }
            out[i + j * r] = acc as f64 * unscale;
        }
    }
    out
}

/// Block reflector from the left on rows `r0..r0+ℓ`, columns `cols` of `c`, with
/// emulated tensor-core GEMMs: W = VᵀC, W₂ = op(T)·W, C ← C − V·W₂ (the subtraction in
/// the working precision). `trans`: op(T) = Tᵀ (the Qᵀ side); otherwise T (backward
/// accumulation of Q). docs/algorithms.md#blocked-reflectors with
/// docs/algorithms.md#mixed-precision's precision split.
fn larfb_left_mixed<T: Scalar>(
    v: &Mat<T>,
    t: &Mat<T>,
    trans: bool,
    c: &mut Mat<T>,
    r0: usize,
    cols: core::ops::Range<usize>,
    p: GemmPrecision,
) {
    let (l, k, nc) = (v.nrows(), v.ncols(), cols.len());
    if nc == 0 {
        return;
    }
    let vf: Vec<f64> = v.as_slice().iter().map(|x| x.to_f64()).collect();
    let mut cf = Vec::with_capacity(l * nc);
    for j in cols.clone() {
        cf.extend(c.col(j)[r0..r0 + l].iter().map(|x| x.to_f64()));
    }
    // op(T) as an explicit k×k matrix, so that the GEMM reads it untransposed.
    let tf: Vec<f64> = (0..k * k)
        .map(|idx| {
            let (i, j) = (idx % k, idx / k);
            if trans {
                t[(j, i)].to_f64()
            } else {
                t[(i, j)].to_f64()
            }
        })
        .collect();
    let vl = Low::new(&vf, l, p);
    let w = gemm_low(&vl, true, &Low::new(&cf, l, p), k, l, nc);
    let w2 = gemm_low(&Low::new(&tf, k, p), false, &Low::new(&w, k, p), k, k, nc);
    let prod = gemm_low(&vl, false, &Low::new(&w2, k, p), l, k, nc);
    for (jj, j) in cols.enumerate() {
        for (x, &d) in c.col_mut(j)[r0..r0 + l]
            .iter_mut()
            .zip(&prod[jj * l..(jj + 1) * l])
        {
            *x -= T::from_f64(d);
        }
    }
}

/// The result of [`mixed_qr_cpu`]: R and the compact-WY blocks (V, T) of Q
/// (docs/algorithms.md#blocked-reflectors).
#[derive(Clone, Debug)]
pub struct MixedQr<T> {
    r: Mat<T>,
    /// (j0, V, T) per block.
    blocks: Vec<(usize, Mat<T>, Mat<T>)>,
    precision: GemmPrecision,
}

impl<T: Scalar> MixedQr<T> {
    /// R (m×n, upper trapezoidal; entries below the diagonal are exactly 0).
    pub fn r(&self) -> &Mat<T> {
        &self.r
    }

    /// The GEMM precision the factorisation was computed with.
    pub fn precision(&self) -> GemmPrecision {
        self.precision
    }

    /// The explicit m×m Q = H₁⋯H_n, accumulated backwards from I
    /// (docs/algorithms.md#blocked-householder-qr)
    /// with the same emulated low-precision GEMMs as the trailing updates
    /// (docs/algorithms.md#mixed-precision:
    /// "accumulate Q with tensor-core GEMMs"), so QᵀQ − I is of order u_low.
    pub fn explicit_q(&self) -> Mat<T> {
        let m = self.r.nrows();
        let mut q = Mat::identity(m);
        for (j0, v, t) in self.blocks.iter().rev() {
            larfb_left_mixed(v, t, false, &mut q, *j0, *j0..m, self.precision);
        }
        q
    }
}

/// Mixed-precision blocked Householder QR of A (m×n, m ≥ n), docs/algorithms.md#mixed-precision:
/// panels, reflectors and T in the working precision T, the trailing-update GEMMs
/// emulating tensor cores (inputs rounded to `params.precision`, f32 accumulation).
///
/// # Errors
/// [`Error::Shape`] (empty A), [`Error::Underdetermined`] (m < n), [`Error::NonFinite`],
/// [`Error::InvalidParam`] (block size 0).
pub fn mixed_qr_cpu<T: Scalar>(a: MatRef<'_, T>, params: &MixedParams) -> Result<MixedQr<T>> {
    let n = a.ncols();
    check_a(OP_QR, a)?;
    let nb = resolve_block_size(OP_QR, params.block_size, n)?;
    let mut r = a.to_owned();
    let mut blocks = Vec::new();
    let mut j0 = 0;
    while j0 < n {
        let jb = nb.min(n - j0);
        // Panel (level 2, working precision): reflectors below the diagonal.
        let (v, tau) = factor_panel(&mut r, j0, jb);
        let t = larft(&v, &tau);
        larfb_left_mixed(&v, &t, true, &mut r, j0, j0 + jb..n, params.precision);
        blocks.push((j0, v, t));
        j0 += jb;
    }
    zero_below_diagonal(&mut r, n);
    Ok(MixedQr {
        r,
        blocks,
        precision: params.precision,
    })
}

pub(super) fn check_a<T: Scalar>(op: &'static str, a: MatRef<'_, T>) -> Result<()> {
    let (m, n) = (a.nrows(), a.ncols());
    if m == 0 || n == 0 {
        let what = if m == 0 { "rows of A" } else { "columns of A" };
        return Err(Error::Shape {
            op,
            what,
            got: 0,
            expected: 1,
        });
    }
    if m < n {
        return Err(Error::Underdetermined { op, m, n });
    }
    if let Some((row, col)) = a.first_non_finite() {
        return Err(Error::NonFinite {
            op,
            what: "A",
            row,
            col,
        });
    }
    Ok(())
}

/// A refined least-squares solution (docs/algorithms.md#mixed-precision,
/// docs/algorithms.md#accuracy-measures).
#[derive(Clone, Debug)]
pub struct MixedSolution<T> {
    /// x (n×q), minimising ‖Ax − b‖₂ column by column.
    pub x: Mat<T>,
    /// Refinement steps taken (the largest over the columns of b).
    pub iterations: usize,
    /// Normwise backward error [`ls_backward_error`] of the returned x (largest over
    /// the columns of b).
    pub backward_error: f64,
}

/// Normwise least-squares backward-error measure η = ‖Aᵀr‖₂ / (‖A‖_F·(‖A‖_F‖x‖₂ + ‖b‖₂)),
/// r = b − Ax, everything in f64. η is O(u) for a backward-stable solver and 0 only at
/// the exact LS solution (the Aᵀr form of the LSQR stopping test; Higham §20.7).
///
/// # Panics
/// If `b.len() != m` or `x.len() != n`.
pub fn ls_backward_error<T: Scalar>(a: MatRef<'_, T>, b: &[T], x: &[T]) -> f64 {
    let (m, n) = (a.nrows(), a.ncols());
    assert!(b.len() == m && x.len() == n);
    let bf: Vec<f64> = b.iter().map(|v| v.to_f64()).collect();
    let xf: Vec<f64> = x.iter().map(|v| v.to_f64()).collect();
    eta_f64(&to_f64(a), m, n, a.norm_fro(), &bf, norm2(&bf), &xf)
}

/// [`ls_backward_error`] on f64 data with ‖A‖_F and ‖b‖₂ given.
fn eta_f64(af: &[f64], m: usize, n: usize, anorm: f64, bf: &[f64], bnorm: f64, xf: &[f64]) -> f64 {
    let mut r = bf.to_vec();
    gemv_sub(af, m, xf, &mut r);
    let atr = gemv_t(af, m, n, &r);
    let den = anorm * (anorm * norm2(xf) + bnorm);
    if den == 0.0 {
        return 0.0;
    }
    norm2(&atr) / den
}

/// x ← 2^k·x, exactly while the results stay normal (steps of at most 2^±1000 so
/// that the factor itself is finite and normal).
fn scale_pow2(x: &mut [f64], mut k: i32) {
    while k != 0 {
        let step = k.clamp(-1000, 1000);
        let f = 2f64.powi(step);
        for v in x.iter_mut() {
            *v *= f;
        }
        k -= step;
    }
}

fn norm2(x: &[f64]) -> f64 {
    let s = x.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    if s == 0.0 {
        return 0.0;
    }
    s * x.iter().map(|v| (v / s).powi(2)).sum::<f64>().sqrt()
}

fn to_f64<T: Scalar>(a: MatRef<'_, T>) -> Vec<f64> {
    let mut out = Vec::with_capacity(a.nrows() * a.ncols());
    for j in 0..a.ncols() {
        out.extend(a.col(j)[..a.nrows()].iter().map(|v| v.to_f64()));
    }
    out
}

/// y −= A x (A m×?, column-major f64).
fn gemv_sub(a: &[f64], m: usize, x: &[f64], y: &mut [f64]) {
    for (j, &xj) in x.iter().enumerate() {
        if xj == 0.0 {
            continue;
        }
        for (yi, &aij) in y.iter_mut().zip(&a[j * m..(j + 1) * m]) {
            *yi = (-xj).mul_add(aij, *yi);
        }
    }
}

/// Aᵀ y.
fn gemv_t(a: &[f64], m: usize, n: usize, y: &[f64]) -> Vec<f64> {
    (0..n)
        .map(|j| {
            a[j * m..(j + 1) * m]
                .iter()
                .zip(y)
                .fold(0.0, |acc, (&p, &q)| p.mul_add(q, acc))
        })
        .collect()
}

/// Solves R z = y in place (R n×n upper triangular, column-major f64 with ld `ld`).
fn solve_r(r: &[f64], ld: usize, n: usize, z: &mut [f64]) {
    for j in (0..n).rev() {
        z[j] /= r[j + j * ld];
        let zj = z[j];
        for i in 0..j {
            z[i] = (-zj).mul_add(r[i + j * ld], z[i]);
        }
    }
}

/// Solves Rᵀ z = y in place.
fn solve_rt(r: &[f64], ld: usize, n: usize, z: &mut [f64]) {
    for j in 0..n {
        let mut s = z[j];
        for i in 0..j {
            s = (-r[i + j * ld]).mul_add(z[i], s);
        }
        z[j] = s / r[j + j * ld];
    }
}

/// Inner solve: δ ≈ (AᵀA)⁻¹h for h = Aᵀr, by conjugate gradients on the normal
/// equations preconditioned by R̃ᵀR̃ (two triangular solves per step; AᵀA applied as
/// Aᵀ(A·p), never formed), all in f64. Mathematically CGLS on A·R̃⁻¹, but the recurred
/// residual is the small normal residual ρ = h − AᵀAδ instead of the O(‖b‖) LS
/// residual, so its rounding errors scale with what the outer loop measures. Stops when
/// ‖ρ‖ ≤ `eps`·‖h‖, on breakdown, or after `max_it` steps.
fn pcg_normal(
    af: &[f64],
    m: usize,
    n: usize,
    rf: &[f64],
    h: &[f64],
    eps: f64,
    max_it: usize,
) -> Vec<f64> {
    let precond = |v: &[f64]| {
        let mut z = v.to_vec();
        solve_rt(rf, m, n, &mut z);
        solve_r(rf, m, n, &mut z);
        z
    };
    let stop = eps * norm2(h);
    let mut delta = vec![0.0; n];
    let mut rho = h.to_vec();
    let mut p = precond(&rho);
    let mut gamma = dot(&rho, &p);
    for _ in 0..max_it {
        if norm2(&rho) <= stop || gamma.is_nan() || gamma <= 0.0 {
            break;
        }
        let mut ap = vec![0.0; m];
        gemv_sub(af, m, &p, &mut ap); // −A p
        let w = gemv_t(af, m, n, &ap); // −AᵀA p
        let pw = -dot(&p, &w);
        if !pw.is_finite() || pw <= 0.0 {
            break;
        }
        let alpha = gamma / pw;
        for (d, &pi) in delta.iter_mut().zip(&p) {
            *d = alpha.mul_add(pi, *d);
        }
        for (ri, &wi) in rho.iter_mut().zip(&w) {
            *ri = alpha.mul_add(wi, *ri); // ρ −= α·AᵀA p
        }
        let z = precond(&rho);
        let gamma_new = dot(&rho, &z);
        let beta = gamma_new / gamma;
        for (pi, &zi) in p.iter_mut().zip(&z) {
            *pi = beta.mul_add(*pi, zi);
        }
        gamma = gamma_new;
    }
    delta
}

fn dot(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).fold(0.0, |acc, (&a, &b)| a.mul_add(b, acc))
}

/// Least squares min ‖Ax − b‖₂ (A m×n, m ≥ n, full rank; b m×q) through the
/// mixed-precision QR of [`mixed_qr_cpu`] and refinement to the working precision's
/// accuracy (docs/algorithms.md#mixed-precision; method and references in the module doc): x₀ = 0,
/// then per step r = b − Ax and h = Aᵀr (f64), δ from R̃ᵀR̃-preconditioned CG on AᵀAδ = h (f64),
/// x += δ; it stops when the backward error is below u/10, after two steps that do not
/// halve it, or after `params.max_iterations` steps, keeps the best iterate, and returns
/// it (rounded to T) only if its [`ls_backward_error`] is ≤ `params.tol` (default 10·m·u).
///
/// # Errors
/// As [`mixed_qr_cpu`]; [`Error::Shape`] when b's rows differ from A's or b is empty;
/// [`Error::InvalidParam`] for `max_iterations = 0`, a bad `tol`, or a column of b whose
/// 2-norm overflows f64 (as the GPU solver);
/// [`Error::RankDeficient`] when R̃ has a zero diagonal entry; [`Error::NotConverged`]
/// (with the steps taken and the backward error reached) when the tolerance is missed.
pub fn lstsq_mixed_cpu<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    params: &MixedParams,
) -> Result<MixedSolution<T>> {
    let (m, n, nrhs) = (a.nrows(), a.ncols(), b.ncols());
    check_a(OP_LS, a)?;
    if b.nrows() != m {
        return Err(Error::Shape {
            op: OP_LS,
            what: "rows of b",
            got: b.nrows(),
            expected: m,
        });
    }
    if nrhs == 0 {
        return Err(Error::Shape {
            op: OP_LS,
            what: "columns of b",
            got: 0,
            expected: 1,
        });
    }
    if let Some((row, col)) = b.first_non_finite() {
        return Err(Error::NonFinite {
            op: OP_LS,
            what: "b",
            row,
            col,
        });
    }
    if params.max_iterations == 0 {
        return Err(Error::InvalidParam {
            op: OP_LS,
            what: "max_iterations",
            why: "must be at least 1".into(),
        });
    }
    let tol = match params.tol {
        None => 10.0 * m as f64 * T::UNIT_ROUNDOFF,
        Some(t) if t.is_finite() && t > 0.0 => t,
        Some(t) => {
            return Err(Error::InvalidParam {
                op: OP_LS,
                what: "tol",
                why: format!("{t} is not a finite positive number"),
            })
        }
    };
    for c in 0..nrhs {
        let bf: Vec<f64> = b.col(c).iter().map(|v| v.to_f64()).collect();
        if !norm2(&bf).is_finite() {
            // As the GPU solver: finite entries whose 2-norm overflows f64 (the
            // refinement's residuals and backward error would be NaN).
            return Err(Error::InvalidParam {
                op: OP_LS,
                what: "b",
                why: format!("‖b‖₂ of column {c} overflows f64"),
            });
        }
    }
    let qr = mixed_qr_cpu(a, params)?;
    let rf: Vec<f64> = qr.r().as_slice().iter().map(|v| v.to_f64()).collect();
    for j in 0..n {
        let rjj = rf[j + j * m];
        if rjj == 0.0 || !rjj.is_finite() {
            return Err(Error::RankDeficient {
                column: j,
                r_jj: rjj.abs(),
                tol: 0.0,
            });
        }
    }
    let af = to_f64(a);
    let u = T::UNIT_ROUNDOFF;
    let anorm = a.norm_fro();
    let max_inner = 10 * n + 50;
    let mut x = Mat::<T>::zeros(n, nrhs);
    let (mut iterations, mut worst) = (0usize, 0.0f64);
    for col in 0..nrhs {
        let mut bf: Vec<f64> = b.col(col)[..m].iter().map(|v| v.to_f64()).collect();
        // The solution is linear in b: refine for 2^shift·b with ‖2^shift·b‖₂ near 1 when
        // ‖b‖₂ is far from 1 (exact power-of-two scaling), and scale x back. Otherwise
        // the inner products of the CG (‖b‖² for the preconditioned residual) overflow
        // from ‖b‖ ≈ 1e154 on, or underflow, and a well-posed problem fails to converge.
        let shift = match norm2(&bf) {
            nb if nb > 0.0 && !(2f64.powi(-100)..=2f64.powi(100)).contains(&nb) => {
                -(nb.log2().floor() as i32)
            }
            _ => 0,
        };
        scale_pow2(&mut bf, shift);
        let bnorm = norm2(&bf);
        let mut xf = vec![0.0f64; n];
        let (mut best, mut best_eta) = (xf.clone(), f64::INFINITY);
        let (mut it, mut idle) = (0, 0);
        while it < params.max_iterations {
            it += 1;
            let mut r = bf.clone();
            gemv_sub(&af, m, &xf, &mut r);
            let h = gemv_t(&af, m, n, &r);
            let delta = pcg_normal(&af, m, n, &rf, &h, INNER_EPS, max_inner);
            for (xi, di) in xf.iter_mut().zip(&delta) {
                *xi += di;
            }
            let eta = eta_f64(&af, m, n, anorm, &bf, bnorm, &xf);
            // A step counts as progress when it at least halves the best backward error.
            idle = if eta <= 0.5 * best_eta { 0 } else { idle + 1 };
            if eta < best_eta {
                best.copy_from_slice(&xf);
                best_eta = eta;
            }
            // Done when far below u, or after two steps without progress.
            if best_eta <= 0.1 * u || idle >= 2 {
                break;
            }
        }
        scale_pow2(&mut best, -shift);
        for (dst, &v) in x.col_mut(col).iter_mut().zip(&best) {
            *dst = T::from_f64(v);
        }
        let eta = ls_backward_error(a, &b.col(col)[..m], x.col(col));
        iterations = iterations.max(it);
        worst = worst.max(eta);
        if eta.is_nan() || eta > tol {
            return Err(Error::NotConverged {
                iterations: it,
                backward_error: eta,
            });
        }
    }
    Ok(MixedSolution {
        x,
        iterations,
        backward_error: worst,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::QrUpdate;
    use crate::base::params::{FactorParams, QPolicy};
    use crate::ops::factorize::run_cpu;
    use crate::ops::factorize::tests::{errs, lower_is_zero, r_diff_up_to_signs};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    const PRECS: [GemmPrecision; 3] =
        [GemmPrecision::Bf16, GemmPrecision::F16, GemmPrecision::Tf32];

    /// m×n matrix U·diag(σ)·Vᵀ (U, V random orthogonal from f64 QR), σ geometric from
    /// 1 to 1/κ, rounded to T.
    fn with_cond<T: Scalar>(rng: &mut StdRng, m: usize, n: usize, kappa: f64) -> Mat<T> {
        let orth = |rng: &mut StdRng, k: usize| {
            let g = Mat::<f64>::from_fn(k, k, |_, _| rng.random_range(-1.0..1.0));
            let b = Mat::<f64>::from_fn(k, 1, |_, _| 1.0);
            run_cpu(
                g.as_ref(),
                b.as_ref(),
                QPolicy::Full,
                FactorParams::default(),
            )
            .unwrap()
            .q()
            .unwrap()
            .unwrap()
        };
        let (u, v) = (orth(rng, m), orth(rng, n));
        let sigma: Vec<f64> = (0..n)
            .map(|i| kappa.powf(-(i as f64) / (n - 1).max(1) as f64))
            .collect();
        let us = Mat::from_fn(m, n, |i, j| u[(i, j)] * sigma[j]);
        let a = us.matmul(&v.transpose());
        Mat::from_fn(m, n, |i, j| T::from_f64(a[(i, j)]))
    }

    /// e_Q, e_A of the mixed QR are of the GEMM precision's order (≤ 10·√n·u_low), yet
    /// clearly above the working precision's (the emulation is active); R matches the
    /// working-precision QR within κ·10·√n·u_low; ‖L‖ = 0.
    fn check_qr<T: Scalar>(seed: u64, m: usize, n: usize, nb: usize) {
        let mut rng = StdRng::seed_from_u64(seed);
        let kappa = 10.0;
        let a = with_cond::<T>(&mut rng, m, n, kappa);
        let b = Mat::<T>::from_fn(m, 1, |_, _| T::ONE);
        let exact = run_cpu(
            a.as_ref(),
            b.as_ref(),
            QPolicy::None,
            FactorParams::default(),
        )
        .unwrap()
        .r()
        .unwrap();
        for p in PRECS {
            let params = MixedParams {
                precision: p,
                block_size: Some(nb),
                ..MixedParams::default()
            };
            let f = mixed_qr_cpu(a.as_ref(), &params).unwrap();
            assert_eq!(f.precision(), p);
            assert!(lower_is_zero(f.r()));
            let q = f.explicit_q();
            let (eq, ea) = errs(&q, f.r(), &a);
            let bound = 10.0 * (n as f64).sqrt() * p.unit_roundoff();
            let floor = 10.0 * T::UNIT_ROUNDOFF * m as f64;
            assert!(
                ea <= bound && eq <= bound,
                "{p:?} {} e_A {ea:e} e_Q {eq:e}",
                T::NAME
            );
            assert!(
                ea > floor.min(0.1 * p.unit_roundoff()),
                "{p:?}: e_A {ea:e} too small"
            );
            let dr = r_diff_up_to_signs(f.r(), &exact) / a.norm_fro();
            assert!(dr <= kappa * bound, "{p:?} R diff {dr:e}");
        }
    }

    #[test]
    fn mixed_qr_error_matches_gemm_precision_f64() {
        check_qr::<f64>(1, 157, 71, 16);
        check_qr::<f64>(2, 45, 45, 13);
    }

    #[test]
    fn mixed_qr_error_matches_gemm_precision_f32() {
        check_qr::<f32>(3, 139, 67, 20);
    }

    #[test]
    fn single_block_is_exact_working_precision() {
        // n ≤ n_b: no trailing update, so the result is the working-precision QR exactly.
        let mut rng = StdRng::seed_from_u64(4);
        let a = with_cond::<f64>(&mut rng, 37, 9, 100.0);
        let params = MixedParams {
            precision: GemmPrecision::Bf16,
            block_size: Some(9),
            ..MixedParams::default()
        };
        let f = mixed_qr_cpu(a.as_ref(), &params).unwrap();
        let b = Mat::<f64>::from_fn(37, 1, |_, _| 1.0);
        let fp = FactorParams {
            block_size: Some(9),
            ..FactorParams::default()
        };
        let exact =
            crate::ops::factorize::run_cpu_with(a.as_ref(), b.as_ref(), QPolicy::None, fp, false)
                .unwrap()
                .r()
                .unwrap();
        let n = exact.ncols();
        assert_eq!(&Mat::from_fn(n, n, |i, j| f.r()[(i, j)]), &exact);
    }

    #[test]
    fn f16_operands_are_prescaled_not_overflowed() {
        // Entries ~1e6 overflow f16 if rounded raw (documented ±∞); the GEMM emulation
        // pre-scales by a power of two, so the product is finite and accurate.
        let mut rng = StdRng::seed_from_u64(6);
        let (l, k, c) = (53, 7, 5);
        let a: Vec<f64> = (0..l * k)
            .map(|_| rng.random_range(-1.0..1.0) * 1e6)
            .collect();
        let b: Vec<f64> = (0..l * c)
            .map(|_| rng.random_range(-1.0..1.0) * 3e-7)
            .collect();
        assert!(GemmPrecision::F16.round(a[0]).is_infinite() || a[0].abs() < 65520.0);
        let got = gemm_low(
            &Low::new(&a, l, GemmPrecision::F16),
            true,
            &Low::new(&b, l, GemmPrecision::F16),
            k,
            l,
            c,
        );
        let amax = a.iter().fold(0.0f64, |x, v| x.max(v.abs()));
        let bmax = b.iter().fold(0.0f64, |x, v| x.max(v.abs()));
        for j in 0..c {
            for i in 0..k {
                let exact: f64 = (0..l).map(|r| a[r + i * l] * b[r + j * l]).sum();
                let err = (got[i + j * k] - exact).abs();
                // Input rounding (2u each) plus f32 accumulation over l terms.
                let bound = (2.0 * GemmPrecision::F16.unit_roundoff() + l as f64 * 6e-8)
                    * l as f64
                    * amax
                    * bmax;
                assert!(
                    got[i + j * k].is_finite() && err <= bound,
                    "{err:e} > {bound:e}"
                );
            }
        }
    }

    #[test]
    fn gemm_accumulates_in_f32() {
        // 1 + 2⁻²⁴·4 terms: each 2⁻²⁴ is lost against 1 in f32 accumulation.
        let a = vec![1.0, 2f64.powi(-24), 2f64.powi(-24), 2f64.powi(-24)];
        let ones = vec![1.0; 4];
        let p = GemmPrecision::Tf32;
        let got = gemm_low(&Low::new(&a, 4, p), true, &Low::new(&ones, 4, p), 1, 4, 1);
        assert_eq!(got[0], 1.0);
    }

    #[test]
    fn errors_are_reported() {
        let a = Mat::<f64>::from_fn(3, 5, |i, j| (i + j) as f64);
        let p = MixedParams::default();
        assert!(matches!(
            mixed_qr_cpu(a.as_ref(), &p),
            Err(Error::Underdetermined { .. })
        ));
        let mut a = Mat::<f64>::from_fn(6, 3, |i, j| (i * j) as f64 + 1.0);
        let b = Mat::<f64>::from_fn(5, 1, |_, _| 1.0);
        assert!(matches!(
            lstsq_mixed_cpu(a.as_ref(), b.as_ref(), &p),
            Err(Error::Shape { .. })
        ));
        let b = Mat::<f64>::from_fn(6, 1, |_, _| 1.0);
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
                tol: Some(-1.0),
                ..p
            },
        ] {
            assert!(matches!(
                lstsq_mixed_cpu(a.as_ref(), b.as_ref(), &bad),
                Err(Error::InvalidParam { .. })
            ));
        }
        // Exactly dependent columns: R̃ has a zero diagonal.
        let z = Mat::<f64>::from_fn(6, 3, |i, j| if j == 2 { 0.0 } else { (i + j) as f64 });
        assert!(matches!(
            lstsq_mixed_cpu(z.as_ref(), b.as_ref(), &p),
            Err(Error::RankDeficient { column: 2, .. })
        ));
        // Finite b whose ‖b‖₂ overflows: refused as by the GPU solver (it ran and
        // reported NotConverged with a NaN backward error).
        let huge = Mat::<f64>::from_fn(6, 2, |i, j| if j == 1 && i < 3 { 1.5e308 } else { 1.0 });
        match lstsq_mixed_cpu(a.as_ref(), huge.as_ref(), &p) {
            Err(Error::InvalidParam { what: "b", why, .. }) => {
                assert!(why.contains("column 1 overflows"), "{why}")
            }
            other => panic!("expected InvalidParam for b, got {other:?}"),
        }
        a[(4, 1)] = f64::NAN;
        assert!(matches!(
            lstsq_mixed_cpu(a.as_ref(), b.as_ref(), &p),
            Err(Error::NonFinite { .. })
        ));
    }

    /// Right-hand sides of norm far from 1 (1e300 overflowed the CG's inner products,
    /// 1e-300 underflowed them: both failed with NotConverged on a well-conditioned
    /// problem); the solution is linear in b.
    #[test]
    fn lstsq_with_extreme_right_hand_side_scales() {
        let mut rng = StdRng::seed_from_u64(9);
        let (m, n) = (57, 13);
        let a = with_cond::<f64>(&mut rng, m, n, 1e3);
        let b = Mat::<f64>::from_fn(m, 1, |_, _| rng.random_range(-1.0..1.0));
        let p = MixedParams::default();
        let x1 = lstsq_mixed_cpu(a.as_ref(), b.as_ref(), &p).unwrap().x;
        for s in [1e300, 1e200, 1e-200, 1e-300] {
            let bs = Mat::<f64>::from_fn(m, 1, |i, _| b[(i, 0)] * s);
            let sol = lstsq_mixed_cpu(a.as_ref(), bs.as_ref(), &p)
                .unwrap_or_else(|e| panic!("b scaled by {s:e}: {e}"));
            let eta = ls_backward_error(a.as_ref(), bs.col(0), sol.x.col(0));
            assert!(
                eta <= 10.0 * m as f64 * f64::EPSILON / 2.0,
                "{s:e}: η {eta:e}"
            );
            for i in 0..n {
                let want = x1[(i, 0)] * s;
                assert!(
                    (sol.x[(i, 0)] - want).abs() <= 1e-10 * want.abs().max(s * 1e-3),
                    "{s:e}: x[{i}] {} vs {want}",
                    sol.x[(i, 0)]
                );
            }
        }
    }

    #[test]
    fn lstsq_refines_to_working_precision() {
        let mut rng = StdRng::seed_from_u64(8);
        let (m, n) = (131, 47);
        let a = with_cond::<f64>(&mut rng, m, n, 1e6);
        let b = Mat::<f64>::from_fn(m, 2, |_, _| rng.random_range(-1.0..1.0));
        for p in PRECS {
            let params = MixedParams {
                precision: p,
                ..MixedParams::default()
            };
            let sol = lstsq_mixed_cpu(a.as_ref(), b.as_ref(), &params).unwrap();
            for c in 0..2 {
                let eta = ls_backward_error(a.as_ref(), b.col(c), sol.x.col(c));
                assert!(eta <= sol.backward_error);
                assert!(eta <= 10.0 * m as f64 * f64::EPSILON / 2.0, "{p:?} {eta:e}");
            }
            assert!(sol.iterations <= 3, "{p:?}: {} steps", sol.iterations);
        }
    }
}
