//! The small triangular least-squares state of rolling and recursive least squares
//! (docs/algorithms.md#rolling-least-squares): the k×k upper-triangular R of one window's
//! rows, d = Q₁ᵀy and the residual norm ρ, updated in place one row at a time. A row
//! enters by k Givens rotations (`givens`, `rot_pair`), a row leaves by the LINPACK-style
//! downdate of [`crate::cpu::rfactor::remove_row`] with its refusal test
//! ([`downdate_refused`]), and the solution is one back substitution. Every buffer is
//! allocated once, in [`LsWindow::new`]: no step allocates.
#![forbid(unsafe_code)]

use crate::base::scalar::Scalar;
use crate::cpu::givens::{givens, rot_pair};
use crate::cpu::rfactor::{downdate_refused, DowndateFailure};

/// R (row-major, upper triangle used), d and ρ of the rows folded in so far, with the
/// downdate's workspace.
#[derive(Clone, Debug)]
pub struct LsWindow<T> {
    k: usize,
    /// R(i, j) at `r[i * k + j]`, j ≥ i; entries below the diagonal are never read.
    r: Vec<T>,
    d: Vec<T>,
    rho: T,
    /// Workspace: the entering row (weighted), or z = R⁻ᵀa of the leaving row.
    z: Vec<T>,
    /// Workspace: the downdate's rotations (c, s).
    cs: Vec<(T, T)>,
    /// Workspace: the downdate's new d.
    d_new: Vec<T>,
}

impl<T: Scalar> LsWindow<T> {
    /// An empty state (no rows) for `k` columns.
    pub fn new(k: usize) -> Self {
        Self {
            k,
            r: vec![T::ZERO; k * k],
            d: vec![T::ZERO; k],
            rho: T::ZERO,
            z: vec![T::ZERO; k],
            cs: vec![(T::ONE, T::ZERO); k],
            d_new: vec![T::ZERO; k],
        }
    }

    /// Forgets every row.
    pub fn clear(&mut self) {
        self.r.fill(T::ZERO);
        self.d.fill(T::ZERO);
        self.rho = T::ZERO;
    }

    /// Multiplies R, d and ρ by `s` (the rows' weights by s²: exponential forgetting
    /// with s = √λ).
    pub fn scale(&mut self, s: T) {
        let k = self.k;
        for i in 0..k {
            for v in &mut self.r[i * k + i..(i + 1) * k] {
                *v *= s;
            }
        }
        for v in &mut self.d {
            *v *= s;
        }
        self.rho *= s;
    }

    /// Folds the row w·x with right-hand side w·y in: R′ᵀR′ = RᵀR + w²xxᵀ,
    /// R′ᵀd′ = Rᵀd + w²x·y, ρ′² = ρ² + (the rotated-out residual)².
    pub fn add_row(&mut self, x: &[T], y: T, w: T) {
        let k = self.k;
        debug_assert_eq!(x.len(), k);
        for (zi, &xi) in self.z.iter_mut().zip(x) {
            *zi = w * xi;
        }
        let mut e = w * y;
        for j in 0..k {
            let row = &mut self.r[j * k + j..(j + 1) * k];
            let (c, s, rr) = givens(row[0], self.z[j]);
            row[0] = rr;
            self.z[j] = T::ZERO;
            for (rl, zl) in row[1..].iter_mut().zip(&mut self.z[j + 1..]) {
                rot_pair(c, s, rl, zl);
            }
            rot_pair(c, s, &mut self.d[j], &mut e);
        }
        self.rho = self.rho.hypot(e);
    }

    /// Removes the row w·x with right-hand side w·y: R′ᵀR′ = RᵀR − w²xxᵀ. On failure
    /// (the refusal test of [`crate::cpu::rfactor::remove_row`]) R and d are left as
    /// they were, and the caller refactorises.
    ///
    /// # Errors
    /// [`DowndateFailure`] when the rows left do not determine R to working precision,
    /// or the residual would turn negative beyond rounding.
    pub fn remove_row(&mut self, x: &[T], y: T, w: T) -> Result<(), DowndateFailure> {
        let k = self.k;
        debug_assert_eq!(x.len(), k);
        // z = R⁻ᵀ(w·x), by rows of R: z_i = a_i / R_ii, then a_l −= R_il·z_i for l > i.
        for (zi, &xi) in self.z.iter_mut().zip(x) {
            *zi = w * xi;
        }
        let mut zz = 0.0f64;
        for i in 0..k {
            let row = &self.r[i * k + i..(i + 1) * k];
            let zi = self.z[i] / row[0];
            self.z[i] = zi;
            zz += zi.to_f64() * zi.to_f64();
            for (zl, &ril) in self.z[i + 1..].iter_mut().zip(&row[1..]) {
                *zl = (-ril).mul_add(zi, *zl);
            }
        }
        let alpha2 = 1.0 - zz;
        if downdate_refused(alpha2, T::UNIT_ROUNDOFF) {
            return Err(DowndateFailure::NotPositiveDefinite { alpha2 });
        }
        // Rotations i = k−1 down to 0 taking (α, zᵢ) to (hypot, 0).
        let mut alpha = T::from_f64(alpha2.sqrt());
        for i in (0..k).rev() {
            let h = alpha.hypot(self.z[i]);
            self.cs[i] = (alpha / h, self.z[i] / h);
            alpha = h;
        }
        // d first (it can still fail): [d; u] through the rotations must end as [d′; w·y].
        let mut t = w * y;
        for i in 0..k {
            let (c, s) = self.cs[i];
            let di = self.d[i];
            let t_in = (-s).mul_add(di, t) / c;
            self.d_new[i] = c.mul_add(di, -(s * t_in));
            t = t_in;
        }
        let (rk, u) = (self.rho.to_f64(), t.to_f64().abs());
        let dn: f64 = self.d.iter().map(|v| v.to_f64() * v.to_f64()).sum();
        let slack = 100.0 * (k as f64 + 1.0) * T::UNIT_ROUNDOFF * (dn + rk * rk);
        if u * u > rk * rk + slack || !u.is_finite() {
            return Err(DowndateFailure::Residual { rhs: 0 });
        }
        self.rho = T::from_f64(((rk - u) * (rk + u)).max(0.0).sqrt());
        self.d.copy_from_slice(&self.d_new);
        // R: a running row, zero at first, meets rotations i = k−1 down to 0.
        self.z.fill(T::ZERO);
        for i in (0..k).rev() {
            let (c, s) = self.cs[i];
            let row = &mut self.r[i * k + i..(i + 1) * k];
            for (rl, xl) in row.iter_mut().zip(&mut self.z[i..]) {
                let (rv, xv) = (*rl, *xl);
                *xl = c.mul_add(xv, s * rv);
                *rl = c.mul_add(rv, -(s * xv));
            }
        }
        Ok(())
    }

    /// The residual sum of squares ρ² of the rows folded in.
    pub fn rss(&self) -> T {
        self.rho * self.rho
    }

    /// ‖R‖_F.
    pub fn norm_r(&self) -> f64 {
        let k = self.k;
        let mut s = 0.0f64;
        for i in 0..k {
            for v in &self.r[i * k + i..(i + 1) * k] {
                s += v.to_f64() * v.to_f64();
            }
        }
        s.sqrt()
    }

    /// Solves Rβ = d into `out` when every |R_jj| > `tol`·‖R‖_F (and is finite); returns
    /// `false` (and leaves `out` alone) when R fails that rank test.
    pub fn solve(&self, tol: f64, out: &mut [T]) -> bool {
        let k = self.k;
        debug_assert_eq!(out.len(), k);
        let limit = tol * self.norm_r();
        let full_rank = (0..k).all(|i| {
            let v = self.r[i * k + i].to_f64().abs();
            v.is_finite() && v > limit
        });
        if !full_rank || !limit.is_finite() {
            return false;
        }
        for i in (0..k).rev() {
            let row = &self.r[i * k + i..(i + 1) * k];
            let mut s = self.d[i];
            for (ril, &bl) in row[1..].iter().zip(&out[i + 1..]) {
                s = (-*ril).mul_add(bl, s);
            }
            out[i] = s / row[0];
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows in, one out, against the normal equations of what is left.
    #[test]
    fn add_then_remove_matches_the_rows_left() {
        let rows: Vec<[f64; 3]> = (0..8)
            .map(|i| {
                let t = i as f64;
                [1.0, t.sin() + 2.0, (0.7 * t).cos()]
            })
            .collect();
        let ys: Vec<f64> = (0..8).map(|i| (i as f64 * 1.3).sin()).collect();
        let mut st = LsWindow::<f64>::new(3);
        for (x, &y) in rows.iter().zip(&ys) {
            st.add_row(x, y, 1.0);
        }
        st.remove_row(&rows[0], ys[0], 1.0).unwrap();
        let mut fresh = LsWindow::<f64>::new(3);
        for (x, &y) in rows[1..].iter().zip(&ys[1..]) {
            fresh.add_row(x, y, 1.0);
        }
        let (mut b1, mut b2) = ([0.0; 3], [0.0; 3]);
        assert!(st.solve(1e-14, &mut b1));
        assert!(fresh.solve(1e-14, &mut b2));
        for (a, b) in b1.iter().zip(&b2) {
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        }
        assert!((st.rss() - fresh.rss()).abs() < 1e-12);
    }

    #[test]
    fn removing_the_only_support_of_a_column_is_refused() {
        let mut st = LsWindow::<f64>::new(2);
        st.add_row(&[1.0, 0.0], 1.0, 1.0);
        st.add_row(&[1.0, 0.0], 2.0, 1.0);
        st.add_row(&[0.0, 1.0], 3.0, 1.0);
        assert!(st.remove_row(&[0.0, 1.0], 3.0, 1.0).is_err());
    }
}
