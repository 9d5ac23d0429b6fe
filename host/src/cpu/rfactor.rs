//! Updates of a triangular factor without Q (docs/algorithms.md#updates-without-q): the
//! n×n upper-triangular R with RᵀR = AᵀA, the right-hand sides d = Q₁ᵀb (n×q) and the
//! residual norms ρⱼ = ‖bⱼ − A xⱼ‖. Rows are folded in by Householder reflectors, removed
//! by the LINPACK-style downdate (solve Rᵀz = a, check 1 − ‖z‖² > 0, rotations), and a
//! block of columns is re-triangularised by Householder reflectors.
#![forbid(unsafe_code)]

use crate::base::mat::Mat;
use crate::base::scalar::Scalar;
use crate::cpu::givens::{givens, rot_pair};
use crate::cpu::householder::{apply_left_split, house, nrm2};

/// Folds the p rows `w` (p×n) with right-hand-side rows `e` (p×q) into R (n×n), d (n×q)
/// and the residual norms `rho` (q): afterwards R'ᵀR' = RᵀR + wᵀw and R'ᵀd' = Rᵀd + wᵀe.
/// `w` and `e` are overwritten (e ends as the rotated-out residual components).
pub fn add_rows<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    rho: &mut [T],
    w: &mut Mat<T>,
    e: &mut Mat<T>,
) {
    add_rows_with(r, d, w, e, |_, _, _| {});
    for (k, rk) in rho.iter_mut().enumerate() {
        *rk = rk.hypot(nrm2(e.col(k)));
    }
}

/// The reflectors of [`add_rows`] without the residual norms: reflector j acts on row j of
/// R (and d) and the p rows of `w` (and `e`); `on_reflector(j, v_tail, τ)` is called for
/// each, so that a state with Q can apply it to its columns.
pub fn add_rows_with<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    w: &mut Mat<T>,
    e: &mut Mat<T>,
    mut on_reflector: impl FnMut(usize, &[T], T),
) {
    let n = r.ncols();
    let q = d.ncols();
    debug_assert!(r.nrows() == n && w.ncols() == n && e.ncols() == q);
    let p = w.nrows();
    if p == 0 {
        return;
    }
    for j in 0..n {
        let (beta, tau) = house(r[(j, j)], w.col_mut(j));
        r[(j, j)] = beta;
        if tau == T::ZERO {
            continue;
        }
        let v: Vec<T> = w.col(j).to_vec();
        for k in j + 1..n {
            let mut head = r[(j, k)];
            apply_left_split(&v, tau, &mut head, w.col_mut(k));
            r[(j, k)] = head;
        }
        for k in 0..q {
            let mut head = d[(j, k)];
            apply_left_split(&v, tau, &mut head, e.col_mut(k));
            d[(j, k)] = head;
        }
        for x in w.col_mut(j) {
            *x = T::ZERO;
        }
        on_reflector(j, &v, tau);
    }
}

/// Why a row could not be removed from the factor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DowndateFailure {
    /// 1 − ‖z‖² ≤ √u (z = R⁻ᵀa): without the row the remaining rows do not determine R to
    /// working precision (AᵀA − aaᵀ is not safely positive definite). `alpha2` is 1 − ‖z‖².
    NotPositiveDefinite {
        /// 1 − ‖z‖² as computed.
        alpha2: f64,
    },
    /// The removed row's right-hand side exceeds what the residual holds (ρ² − ζ² < 0
    /// beyond rounding) for right-hand side `rhs`.
    Residual {
        /// The right-hand side.
        rhs: usize,
    },
}

/// The downdate's refusal test: `alpha2` = 1 − ‖z‖² (z = R⁻ᵀa, a the leaving row) is NaN
/// or at most √u, so that the rows left do not determine R to working precision
/// (docs/algorithms.md#updates-without-q). Shared by [`remove_row`] and the rolling
/// least-squares kernel (`cpu/rolling.rs`).
#[inline]
pub fn downdate_refused(alpha2: f64, unit_roundoff: f64) -> bool {
    alpha2.is_nan() || alpha2 <= unit_roundoff.sqrt()
}

/// Removes one row `a` (n) with right-hand-side entries `beta` (q) from R, d and `rho`:
/// afterwards R'ᵀR' = RᵀR − aaᵀ and R'ᵀd' = Rᵀd − aβᵀ. On failure nothing is changed.
///
/// # Errors
/// [`DowndateFailure`] when the downdate is not defined to working precision.
pub fn remove_row<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    rho: &mut [T],
    a: &[T],
    beta: &[T],
) -> Result<(), DowndateFailure> {
    let n = r.ncols();
    let q = d.ncols();
    debug_assert!(a.len() == n && beta.len() == q && rho.len() == q);
    // z = R⁻ᵀa (forward substitution: Rᵀ is lower triangular).
    let mut z = a.to_vec();
    for i in 0..n {
        let mut s = z[i];
        for k in 0..i {
            s = (-r[(k, i)]).mul_add(z[k], s);
        }
        z[i] = s / r[(i, i)];
    }
    let zn = nrm2(&z).to_f64();
    let alpha2 = (1.0 - zn) * (1.0 + zn);
    // 1 − ‖z‖² is computed with an absolute error of order κ(R)·u, so a row the others do
    // not determine (exactly 0) can come out at u or a little above: refuse up to √u
    // (docs/algorithms.md#updates-without-q).
    if downdate_refused(alpha2, T::UNIT_ROUNDOFF) {
        return Err(DowndateFailure::NotPositiveDefinite { alpha2 });
    }
    // Rotations i = n−1 down to 0 taking (α, zᵢ) to (hypot, 0); the running α ends at 1.
    let mut cs = vec![(T::ONE, T::ZERO); n];
    let mut alpha = T::from_f64(alpha2.sqrt());
    for i in (0..n).rev() {
        let h = alpha.hypot(z[i]);
        cs[i] = (alpha / h, z[i] / h);
        alpha = h;
    }
    // Right-hand sides first (they can still fail): the vector [d; u] through the same
    // rotations must end as [d'; β], so run them backwards from β.
    let mut new_d = Mat::<T>::zeros(n, q);
    let mut new_rho = vec![T::ZERO; q];
    for k in 0..q {
        let mut x = beta[k];
        for i in 0..n {
            let (c, s) = cs[i];
            let di = d[(i, k)];
            let x_in = (-s).mul_add(di, x) / c;
            new_d[(i, k)] = c.mul_add(di, -(s * x_in));
            x = x_in;
        }
        let (rk, u) = (rho[k].to_f64(), x.to_f64().abs());
        let dn = nrm2(d.col(k)).to_f64();
        let slack = 100.0 * (n as f64 + 1.0) * T::UNIT_ROUNDOFF * (dn * dn + rk * rk);
        if u * u > rk * rk + slack {
            return Err(DowndateFailure::Residual { rhs: k });
        }
        new_rho[k] = T::from_f64(((rk - u) * (rk + u)).max(0.0).sqrt());
    }
    // R: column j meets rotations i = j down to 0 against a running zero row.
    for j in 0..n {
        let mut x = T::ZERO;
        for i in (0..=j).rev() {
            let (c, s) = cs[i];
            let rij = r[(i, j)];
            let t = c.mul_add(x, s * rij);
            r[(i, j)] = c.mul_add(rij, -(s * x));
            x = t;
        }
    }
    *d = new_d;
    rho.copy_from_slice(&new_rho);
    Ok(())
}

/// Re-triangularises columns `k0..` of the (n+p)×c matrix `r` whose entries below the
/// diagonal are nonzero only in rows ≤ j + `band` of column j, by one Householder
/// reflector a column over rows j..=j+band, applied to the later columns and to the rows
/// of `d`. Entries below the diagonal are set to exact zeros. `on_reflector(j, v_tail, τ)`
/// is called for each reflector (rows j..=j+v_tail.len()), so that a state with Q can
/// apply it to Q's columns.
pub fn retriangularise_band<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    k0: usize,
    band: usize,
    mut on_reflector: impl FnMut(usize, &[T], T),
) {
    let rows = r.nrows();
    let c = r.ncols();
    let q = d.ncols();
    let (mut tail, mut buf) = (Vec::with_capacity(band), Vec::with_capacity(band));
    for j in k0..c.min(rows) {
        let end = (j + 1 + band).min(rows);
        if end <= j + 1 {
            continue;
        }
        tail.clear();
        tail.extend((j + 1..end).map(|i| r[(i, j)]));
        let (beta, tau) = house(r[(j, j)], &mut tail);
        r[(j, j)] = beta;
        for i in j + 1..end {
            r[(i, j)] = T::ZERO;
        }
        if tau == T::ZERO {
            continue;
        }
        buf.clear();
        buf.resize(end - j - 1, T::ZERO);
        for k in j + 1..c {
            let mut head = r[(j, k)];
            for (b, i) in buf.iter_mut().zip(j + 1..end) {
                *b = r[(i, k)];
            }
            apply_left_split(&tail, tau, &mut head, &mut buf);
            r[(j, k)] = head;
            for (b, i) in buf.iter().zip(j + 1..end) {
                r[(i, k)] = *b;
            }
        }
        for k in 0..q {
            let mut head = d[(j, k)];
            for (b, i) in buf.iter_mut().zip(j + 1..end) {
                *b = d[(i, k)];
            }
            apply_left_split(&tail, tau, &mut head, &mut buf);
            d[(j, k)] = head;
            for (b, i) in buf.iter().zip(j + 1..end) {
                d[(i, k)] = *b;
            }
        }
        on_reflector(j, &tail, tau);
    }
}

/// Deletes columns k0..k0+p of R (n×n), re-triangularises, and moves the last p rows of
/// d into the residual norms: R' is (n−p)×(n−p), d' (n−p)×q.
pub fn delete_cols<T: Scalar>(r: &mut Mat<T>, d: &mut Mat<T>, rho: &mut [T], k0: usize, p: usize) {
    let mut gone = vec![T::ZERO; d.ncols()];
    delete_cols_keeping(r, d, k0, p, &mut gone, |_, _, _| {});
    for (x, g) in rho.iter_mut().zip(gone) {
        *x = x.hypot(g);
    }
}

/// Deletes columns k0..k0+p of R (n×n) and re-triangularises the band below them
/// (docs/algorithms.md#column-deletion), in R's and d's own buffers: R becomes
/// (n−p)×(n−p) and d (n−p)×q. `on_reflector(j, tail, τ)` is called for each reflector,
/// as by [`retriangularise_band`], so that a state with Q can apply it to its columns.
pub fn delete_cols_with<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    k0: usize,
    p: usize,
    on_reflector: impl FnMut(usize, &[T], T),
) {
    let mut gone = vec![T::ZERO; d.ncols()];
    delete_cols_keeping(r, d, k0, p, &mut gone, on_reflector);
}

/// [`delete_cols_with`], also returning in `gone` the norm of each column of d's last p
/// rows (the part that leaves for the residual).
fn delete_cols_keeping<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    k0: usize,
    p: usize,
    gone: &mut [T],
    on_reflector: impl FnMut(usize, &[T], T),
) {
    let n = r.ncols();
    r.remove_rows_cols(0..0, k0..k0 + p);
    retriangularise_band(r, d, k0, p, on_reflector);
    // the band's reflectors zeroed R's entries below the diagonal; rows n−p.. are zero
    r.remove_rows_cols(n - p..n, 0..0);
    for (k, g) in gone.iter_mut().enumerate() {
        *g = nrm2(&d.col(k)[n - p..n]);
    }
    d.remove_rows_cols(n - p..n, 0..0);
}

/// Inserts p columns at k0: `c` (n×p) is their part along the current factor's columns
/// (Q₁ᵀU), `g` (p×p, upper triangular) the R of what is left, `f` (p×q) the right-hand
/// sides' part along the new directions. Builds the (n+p)×(n+p) factor and d (n+p rows)
/// and zeroes the inserted columns below the diagonal by Givens rotations from the bottom
/// (docs/algorithms.md#column-insertion): column k0+t meets rotations on rows (i−1, i),
/// i = n+t down to k0+t+1. `rot(i, c, s)` is called for each, so that a state with Q can
/// rotate its columns (i−1, i) the same way. The caller updates the residual norms.
pub fn insert_cols<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    k0: usize,
    c: &Mat<T>,
    g: &Mat<T>,
    f: &Mat<T>,
    mut rot: impl FnMut(usize, T, T),
) {
    let n = r.ncols();
    let p = c.ncols();
    let q = d.ncols();
    let np = n + p;
    let mut rr = Mat::<T>::zeros(np, np);
    for j in 0..np {
        if j < k0 {
            for i in 0..=j {
                rr[(i, j)] = r[(i, j)];
            }
        } else if j < k0 + p {
            for i in 0..n {
                rr[(i, j)] = c[(i, j - k0)];
            }
            for i in 0..=(j - k0) {
                rr[(n + i, j)] = g[(i, j - k0)];
            }
        } else {
            for i in 0..=(j - p) {
                rr[(i, j)] = r[(i, j - p)];
            }
        }
    }
    let mut dd = Mat::from_fn(np, q, |i, k| if i < n { d[(i, k)] } else { f[(i - n, k)] });
    for t in 0..p {
        let j = k0 + t;
        for i in (j + 1..=n + t).rev() {
            let (cs, sn, rho) = givens(rr[(i - 1, j)], rr[(i, j)]);
            rr[(i - 1, j)] = rho;
            rr[(i, j)] = T::ZERO;
            for k in j + 1..np {
                let (mut x, mut y) = (rr[(i - 1, k)], rr[(i, k)]);
                rot_pair(cs, sn, &mut x, &mut y);
                rr[(i - 1, k)] = x;
                rr[(i, k)] = y;
            }
            for k in 0..q {
                let (mut x, mut y) = (dd[(i - 1, k)], dd[(i, k)]);
                rot_pair(cs, sn, &mut x, &mut y);
                dd[(i - 1, k)] = x;
                dd[(i, k)] = y;
            }
            rot(i, cs, sn);
        }
    }
    *r = rr;
    *d = dd;
}

/// A + u vᵀ on the factor (docs/algorithms.md#rank-one-update): `w` (n+1) is u's part
/// along the factor's columns followed by the norm of the rest (γ), `f` (q) the
/// right-hand sides' part along that rest. Stage A rotates (i−1, i), i = n down to 1, to
/// reduce w to a multiple of e₁ (R becomes upper Hessenberg), R's row 0 gains w₀vᵀ, and
/// stage B rotates (i, i+1), i = 0..n−1, back to triangular. `rot(i, c, s)` is called for
/// each rotation of rows (i−1, i), in order, so that a state with Q can rotate its columns
/// (i−1, i) of [Q₁ q̂]. Returns the last row of the rotated right-hand sides (the part that
/// leaves for the residual).
pub fn rank_one<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    mut w: Vec<T>,
    f: &[T],
    v: &[T],
    mut rot: impl FnMut(usize, T, T),
) -> Vec<T> {
    let (n, q) = (r.ncols(), d.ncols());
    debug_assert!(w.len() == n + 1 && f.len() == q && v.len() == n);
    // R and d gain a last row (zeros, f) in their own buffers and lose it at the end.
    let (ra, da) = (r, d);
    ra.insert_zero_rows(n, 1);
    da.insert_zero_rows(n, 1);
    for (k, &fk) in f.iter().enumerate() {
        da[(n, k)] = fk;
    }
    let rotate_rows = |ra: &mut Mat<T>, da: &mut Mat<T>, i: usize, c: T, s: T, from: usize| {
        for col in from..n {
            let (mut x, mut y) = (ra[(i - 1, col)], ra[(i, col)]);
            rot_pair(c, s, &mut x, &mut y);
            ra[(i - 1, col)] = x;
            ra[(i, col)] = y;
        }
        for k in 0..q {
            let (mut x, mut y) = (da[(i - 1, k)], da[(i, k)]);
            rot_pair(c, s, &mut x, &mut y);
            da[(i - 1, k)] = x;
            da[(i, k)] = y;
        }
    };
    for i in (1..=n).rev() {
        let (cs, sn, rho) = givens(w[i - 1], w[i]);
        w[i - 1] = rho;
        w[i] = T::ZERO;
        rotate_rows(ra, da, i, cs, sn, i - 1);
        rot(i, cs, sn);
    }
    for j in 0..n {
        ra[(0, j)] = w[0].mul_add(v[j], ra[(0, j)]);
    }
    for i in 0..n {
        let (cs, sn, rho) = givens(ra[(i, i)], ra[(i + 1, i)]);
        ra[(i, i)] = rho;
        ra[(i + 1, i)] = T::ZERO;
        rotate_rows(ra, da, i + 1, cs, sn, i + 1);
        rot(i + 1, cs, sn);
    }
    // Stage B zeroed the sub-diagonal that stage A filled; R's last row is zero again.
    let last = (0..q).map(|k| da[(n, k)]).collect();
    ra.remove_rows_cols(n..n + 1, 0..0);
    da.remove_rows_cols(n..n + 1, 0..0);
    last
}

/// R⁻¹ y for each column of `y` (back substitution), n×k.
pub fn solve_upper<T: Scalar>(r: &Mat<T>, y: &Mat<T>) -> Mat<T> {
    let n = r.ncols();
    let mut x = y.clone();
    for k in 0..x.ncols() {
        let col = x.col_mut(k);
        for i in (0..n).rev() {
            let mut s = col[i];
            for j in i + 1..n {
                s = (-r[(i, j)]).mul_add(col[j], s);
            }
            col[i] = s / r[(i, i)];
        }
    }
    x
}

/// R⁻ᵀ y for each column of `y` (forward substitution), n×k.
pub fn solve_upper_transpose<T: Scalar>(r: &Mat<T>, y: &Mat<T>) -> Mat<T> {
    let n = r.ncols();
    let mut z = y.clone();
    for k in 0..z.ncols() {
        let col = z.col_mut(k);
        for i in 0..n {
            let mut s = col[i];
            for j in 0..i {
                s = (-r[(j, i)]).mul_add(col[j], s);
            }
            col[i] = s / r[(i, i)];
        }
    }
    z
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 11) as f64 / (1u64 << 53) as f64) - 0.5
    }

    fn random(m: usize, n: usize, seed: &mut u64) -> Mat<f64> {
        Mat::from_fn(m, n, |_, _| lcg(seed))
    }

    /// R (n×n), d (n×q) and ρ of [A b] by a Householder QR of the stacked rows.
    fn factor(a: &Mat<f64>, b: &Mat<f64>) -> (Mat<f64>, Mat<f64>, Vec<f64>) {
        let (n, q) = (a.ncols(), b.ncols());
        let mut r = Mat::zeros(n, n);
        let mut d = Mat::zeros(n, q);
        let mut rho = vec![0.0; q];
        add_rows(&mut r, &mut d, &mut rho, &mut a.clone(), &mut b.clone());
        (r, d, rho)
    }

    /// max |RᵀR − AᵀA| / ‖A‖², and the same for Rᵀd − Aᵀb and ρ² + ‖d‖² − ‖b‖².
    fn gram_errors(a: &Mat<f64>, b: &Mat<f64>, r: &Mat<f64>, d: &Mat<f64>, rho: &[f64]) -> f64 {
        let scale = a.norm_fro().powi(2) + b.norm_fro().powi(2);
        let rtr = r.transpose().matmul(r);
        let ata = a.transpose().matmul(a);
        let rtd = r.transpose().matmul(d);
        let atb = a.transpose().matmul(b);
        let mut e: f64 = 0.0;
        for i in 0..a.ncols() {
            for j in 0..a.ncols() {
                e = e.max((rtr[(i, j)] - ata[(i, j)]).abs());
            }
            for k in 0..b.ncols() {
                e = e.max((rtd[(i, k)] - atb[(i, k)]).abs());
            }
        }
        for (k, rk) in rho.iter().enumerate() {
            let dn: f64 = d.col(k).iter().map(|x| x * x).sum();
            let bn: f64 = b.col(k).iter().map(|x| x * x).sum();
            e = e.max((rk * rk + dn - bn).abs());
        }
        e / scale
    }

    #[test]
    fn rows_in_and_out_keep_the_normal_equations() {
        let mut seed = 7;
        let (m, n, q) = (53, 11, 2);
        let a = random(m, n, &mut seed);
        let b = random(m, q, &mut seed);
        let (mut r, mut d, mut rho) = factor(&a, &b);
        assert!(gram_errors(&a, &b, &r, &d, &rho) < 1e-14);
        // remove rows 0..5 one at a time
        let mut a2 = a.clone();
        let mut b2 = b.clone();
        for _ in 0..5 {
            let row: Vec<f64> = (0..n).map(|j| a2[(0, j)]).collect();
            let rhs: Vec<f64> = (0..q).map(|k| b2[(0, k)]).collect();
            remove_row(&mut r, &mut d, &mut rho, &row, &rhs).unwrap();
            a2 = Mat::from_fn(a2.nrows() - 1, n, |i, j| a2[(i + 1, j)]);
            b2 = Mat::from_fn(b2.nrows() - 1, q, |i, k| b2[(i + 1, k)]);
        }
        let err = gram_errors(&a2, &b2, &r, &d, &rho);
        assert!(err < 1e-12, "downdate error {err}");
        // and the solution agrees with a fresh factor's
        let (r0, d0, rho0) = factor(&a2, &b2);
        let (x, x0) = (solve_upper(&r, &d), solve_upper(&r0, &d0));
        for k in 0..q {
            for i in 0..n {
                assert!((x[(i, k)] - x0[(i, k)]).abs() < 1e-11 * (1.0 + x0[(i, k)].abs()));
            }
            assert!((rho[k] - rho0[k]).abs() < 1e-11 * (1.0 + rho0[k]));
        }
    }

    #[test]
    fn a_failed_downdate_changes_nothing() {
        let mut seed = 3;
        let (n, q) = (6, 1);
        let a = random(n, n, &mut seed); // square: removing any row loses rank
        let b = random(n, q, &mut seed);
        let (mut r, mut d, mut rho) = factor(&a, &b);
        let (r0, d0, rho0) = (r.clone(), d.clone(), rho.clone());
        let row: Vec<f64> = (0..n).map(|j| a[(2, j)]).collect();
        let out = remove_row(&mut r, &mut d, &mut rho, &row, &[b[(2, 0)]]);
        assert!(
            matches!(out, Err(DowndateFailure::NotPositiveDefinite { .. })),
            "{out:?}"
        );
        assert!(r == r0 && d == d0 && rho == rho0);
    }

    #[test]
    fn column_deletion_and_insertion_match_a_fresh_factor() {
        let mut seed = 11;
        let (m, n, q) = (41, 9, 2);
        let a = random(m, n, &mut seed);
        let b = random(m, q, &mut seed);
        let (mut r, mut d, mut rho) = factor(&a, &b);
        let (k0, p) = (3, 2);
        delete_cols(&mut r, &mut d, &mut rho, k0, p);
        let keep: Vec<usize> = (0..k0).chain(k0 + p..n).collect();
        let a2 = Mat::from_fn(m, n - p, |i, j| a[(i, keep[j])]);
        assert!(gram_errors(&a2, &b, &r, &d, &rho) < 1e-14);
        // insert the two columns back at k0 from the data (c = R⁻ᵀA'ᵀU, g, f)
        let u = Mat::from_fn(m, p, |i, j| a[(i, k0 + j)]);
        let c = solve_upper_transpose(&r, &a2.transpose().matmul(&u));
        let z0 = a2.matmul(&solve_upper(&r, &c));
        let z = Mat::from_fn(m, p, |i, j| u[(i, j)] - z0[(i, j)]);
        let (g, _, _) = factor(&z, &Mat::zeros(m, 1));
        let resid_part = solve_upper_transpose(&g, &z.transpose().matmul(&b));
        let mut rho2 = rho.clone();
        insert_cols(&mut r, &mut d, k0, &c, &g, &resid_part, |_, _, _| {});
        for (k, r2) in rho2.iter_mut().enumerate() {
            let fk: f64 = resid_part.col(k).iter().map(|x| x * x).sum();
            *r2 = (*r2 * *r2 - fk).max(0.0).sqrt();
        }
        assert!(gram_errors(&a, &b, &r, &d, &rho2) < 1e-12);
    }
}
