//! Compact-WY block reflectors, serial (docs/algorithms.md#blocked-reflectors, LAPACK
//! `xLARFT`/`xLARFB` pattern).
//! H₁H₂⋯H_k = I − V T Vᵀ with V unit lower trapezoidal (v_i(i) = 1, zeros above) and
//! T upper triangular; LAPACK τ ≥ 0 and T with explicit minus signs
//! (docs/algorithms.md#block-reflector-sign).
//! T is built from the Gram matrix S = VᵀV (docs/algorithms.md#blocked-reflectors): O(ℓk² + k³);
//! each application costs O(ℓ·k·c) for c columns (rows) of the target.
#![forbid(unsafe_code)]

use core::ops::Range;

use crate::base::error::{Error, Result};
use crate::base::mat::Mat;
use crate::base::scalar::Scalar;

/// Resolves an optional block size: `None` gives `default_block_size` of `cols`,
/// `Some(0)` is refused (docs/algorithms.md#blocked-householder-qr, docs/algorithms.md#block-size).
///
/// # Errors
/// [`Error::InvalidParam`] for `Some(0)`.
pub fn resolve_block_size(
    op: &'static str,
    block_size: Option<usize>,
    cols: usize,
) -> Result<usize> {
    match block_size {
        Some(0) => Err(Error::InvalidParam {
            op,
            what: "block_size",
            why: "must be at least 1".into(),
        }),
        Some(nb) => Ok(nb),
        None => Ok(crate::base::params::default_block_size(cols)),
    }
}

/// Panel factorisation (level 2) of columns j0..j0+jb of `r`, rows j0..m
/// (docs/algorithms.md#blocked-householder-qr):
/// one `house` per column, applied to the rest of the panel; β lands on the
/// diagonal and the reflector tails below it. Returns V (ℓ×jb with ℓ = m − j0,
/// unit lower trapezoidal, explicit ones and zeros) and the τ's, ready for
/// [`larft`] and the block application.
pub fn factor_panel<T: Scalar>(r: &mut Mat<T>, j0: usize, jb: usize) -> (Mat<T>, Vec<T>) {
    use crate::cpu::householder::{apply_left_split, house};
    let m = r.nrows();
    let mut tau = Vec::with_capacity(jb);
    for j in j0..j0 + jb {
        let (head, tail) = r.col_mut(j)[j..].split_first_mut().expect("j < m");
        let (beta, t) = house(*head, tail);
        *head = beta;
        tau.push(t);
        for c in j + 1..j0 + jb {
            let (vj, cc) = r.two_cols_mut(j, c);
            let (ch, ct) = cc[j..].split_first_mut().expect("j < m");
            apply_left_split(&vj[j + 1..], t, ch, ct);
        }
    }
    let v = Mat::from_fn(m - j0, jb, |i, k| match i.cmp(&k) {
        core::cmp::Ordering::Equal => T::ONE,
        core::cmp::Ordering::Less => T::ZERO,
        core::cmp::Ordering::Greater => r[(j0 + i, j0 + k)],
    });
    (v, tau)
}

/// Sets the strictly lower part of the first `n` columns of `r` to exact zero
/// (docs/algorithms.md#exact-zeros-below-the-diagonal: no rounding residue below the diagonal, ‖L‖
/// = 0).
pub fn zero_below_diagonal<T: Scalar>(r: &mut Mat<T>, n: usize) {
    for j in 0..n {
        for x in &mut r.col_mut(j)[j + 1..] {
            *x = T::ZERO;
        }
    }
}

/// The Gram matrix S = VᵀV (k×k, only the strictly upper part is needed by
/// [`larft_from_gram`]). V is ℓ×k with its structural zeros above the unit diagonal
/// stored explicitly, so the sums start at row i.
pub fn gram<T: Scalar>(v: &Mat<T>) -> Mat<T> {
    let k = v.ncols();
    let mut s = Mat::zeros(k, k);
    for j in 0..k {
        let vj = v.col(j);
        for i in 0..j {
            let vi = v.col(i);
            let mut acc = T::ZERO;
            for r in j..v.nrows() {
                acc = vi[r].mul_add(vj[r], acc);
            }
            s[(i, j)] = acc;
        }
    }
    s
}

/// Forward, columnwise T factor from the Gram matrix S (S(i, j) = v_iᵀv_j for i < j)
/// and the τ's (docs/algorithms.md#blocked-reflectors: T(i,i) = τ_i, T(0:i, i) = −τ_i·T(0:i,
/// 0:i)·S(0:i, i)).
/// Only the strictly upper part of `s` is read, so a structured block (row addition,
/// docs/algorithms.md#row-insertion, where VᵀV reduces to V_UᵀV_U off the diagonal) can pass its
/// own S.
pub fn larft_from_gram<T: Scalar>(s: &Mat<T>, tau: &[T]) -> Mat<T> {
    let k = tau.len();
    assert!(s.nrows() == k && s.ncols() == k);
    let mut t = Mat::zeros(k, k);
    for i in 0..k {
        t[(i, i)] = tau[i];
        if tau[i] == T::ZERO {
            continue; // H_i = I: its column of T is zero above the diagonal.
        }
        // t(0:i, i) = −τ_i · T(0:i, 0:i) · s(0:i, i), T upper triangular.
        for r in 0..i {
            let mut acc = T::ZERO;
            for c in r..i {
                acc = t[(r, c)].mul_add(s[(c, i)], acc);
            }
            t[(r, i)] = -tau[i] * acc;
        }
    }
    t
}

/// T for an explicit V (ℓ×k, unit lower trapezoidal): `larft_from_gram(gram(v), tau)`.
pub fn larft<T: Scalar>(v: &Mat<T>, tau: &[T]) -> Mat<T> {
    assert_eq!(v.ncols(), tau.len());
    larft_from_gram(&gram(v), tau)
}

/// Applies the block reflector from the left to rows `r0..r0+ℓ` and columns `cols`
/// of `c`: with `trans`, C ← (I − V Tᵀ Vᵀ) C = H_k⋯H₁ C (the Qᵀ side: trailing matrix
/// and right-hand sides); without, C ← (I − V T Vᵀ) C = H₁⋯H_k C (backward
/// accumulation of Q). docs/algorithms.md#blocked-reflectors: C −= V·op(T)·(VᵀC).
pub fn larfb_left<T: Scalar>(
    v: &Mat<T>,
    t: &Mat<T>,
    trans: bool,
    c: &mut Mat<T>,
    r0: usize,
    cols: Range<usize>,
) {
    let (l, k) = (v.nrows(), v.ncols());
    assert!(t.nrows() == k && t.ncols() == k && r0 + l <= c.nrows() && cols.end <= c.ncols());
    let mut w = vec![T::ZERO; k];
    let mut w2 = vec![T::ZERO; k];
    for col in cols {
        let cc = &mut c.col_mut(col)[r0..r0 + l];
        // w = Vᵀ c (V(r, i) = 0 for r < i).
        for (i, wi) in w.iter_mut().enumerate() {
            let vi = v.col(i);
            let mut acc = T::ZERO;
            for r in i..l {
                acc = vi[r].mul_add(cc[r], acc);
            }
            *wi = acc;
        }
        // w2 = op(T) w.
        for (i, w2i) in w2.iter_mut().enumerate() {
            let mut acc = T::ZERO;
            if trans {
                for r in 0..=i {
                    acc = t[(r, i)].mul_add(w[r], acc);
                }
            } else {
                for r in i..k {
                    acc = t[(i, r)].mul_add(w[r], acc);
                }
            }
            *w2i = acc;
        }
        // c −= V w2.
        for (i, &wi) in w2.iter().enumerate() {
            if wi == T::ZERO {
                continue;
            }
            for (x, &vr) in cc[i..].iter_mut().zip(&v.col(i)[i..]) {
                *x = (-wi).mul_add(vr, *x);
            }
        }
    }
}

/// Applies the block reflector from the right to columns `c0..c0+ℓ` of `c`:
/// C ← C (I − V T Vᵀ) = C·H₁⋯H_k, computed as C −= ((C V) T) Vᵀ
/// (docs/algorithms.md#blocked-reflectors); used to carry an explicit Q through an update.
pub fn larfb_right<T: Scalar>(v: &Mat<T>, t: &Mat<T>, c: &mut Mat<T>, c0: usize) {
    let (l, k) = (v.nrows(), v.ncols());
    let rows = c.nrows();
    assert!(t.nrows() == k && t.ncols() == k && c0 + l <= c.ncols());
    // W = C(:, c0:c0+ℓ) V, rows×k.
    let mut w = Mat::<T>::zeros(rows, k);
    for i in 0..k {
        let vi = v.col(i);
        for (r, &s) in vi.iter().enumerate().skip(i) {
            if s == T::ZERO {
                continue;
            }
            let src = c.col(c0 + r);
            let dst = w.col_mut(i);
            for (d, &x) in dst.iter_mut().zip(src) {
                *d = x.mul_add(s, *d);
            }
        }
    }
    // W ← W T (T upper triangular)
    times_upper_t(&mut w, t, k);
    // C(:, c0 + r) −= Σ_i W(:, i) V(r, i).
    for r in 0..l {
        let dst = c.col_mut(c0 + r);
        for i in 0..k.min(r + 1) {
            let s = v[(r, i)];
            if s == T::ZERO {
                continue;
            }
            for (d, &x) in dst.iter_mut().zip(w.col(i)) {
                *d = (-s).mul_add(x, *d);
            }
        }
    }
}

/// W ← W·T for the upper triangular k×k T, on the first k columns of `w`: column i from
/// columns 0..=i, right to left (the W·T step of the compact-WY block reflector).
pub(crate) fn times_upper_t<T: Scalar>(w: &mut Mat<T>, t: &Mat<T>, k: usize) {
    for i in (0..k).rev() {
        let tii = t[(i, i)];
        for x in w.col_mut(i).iter_mut() {
            *x *= tii;
        }
        for r in 0..i {
            let s = t[(r, i)];
            if s == T::ZERO {
                continue;
            }
            let (dst, src) = w.two_cols_mut(i, r);
            for (d, &x) in dst.iter_mut().zip(src.iter()) {
                *d = x.mul_add(s, *d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::householder::{apply_left, house};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Random V (ℓ×k, unit lower trapezoidal) with genuine reflector τ's from `house`.
    fn random_block(rng: &mut StdRng, l: usize, k: usize) -> (Mat<f64>, Vec<f64>) {
        let mut v = Mat::zeros(l, k);
        let mut tau = Vec::new();
        for i in 0..k {
            let alpha: f64 = rng.random_range(-1.0..1.0);
            let mut x: Vec<f64> = (i + 1..l).map(|_| rng.random_range(-1.0..1.0)).collect();
            let (_, t) = house(alpha, &mut x);
            v[(i, i)] = 1.0;
            for (r, xr) in x.into_iter().enumerate() {
                v[(i + 1 + r, i)] = xr;
            }
            tau.push(t);
        }
        (v, tau)
    }

    #[test]
    fn block_matches_sequential_reflectors() {
        let mut rng = StdRng::seed_from_u64(11);
        for &(l, k, nc) in &[
            (1usize, 1usize, 3usize),
            (33, 7, 5),
            (31, 31, 2),
            (45, 13, 9),
        ] {
            let (v, tau) = random_block(&mut rng, l, k);
            let t = larft(&v, &tau);
            let c0 = Mat::from_fn(l + 2, nc + 1, |_, _| rng.random_range(-1.0..1.0));
            // Reference: apply H_1, then H_2, … (Qᵀ side) column by column.
            let mut cref = c0.clone();
            for col in 1..=nc {
                for (i, &ti) in tau.iter().enumerate() {
                    let cc = &mut cref.col_mut(col)[1 + i..1 + l];
                    apply_left(&v.col(i)[i + 1..], ti, cc);
                }
            }
            let mut c = c0.clone();
            larfb_left(&v, &t, true, &mut c, 1, 1..nc + 1);
            for j in 0..c.ncols() {
                for i in 0..c.nrows() {
                    assert!((c[(i, j)] - cref[(i, j)]).abs() < 1e-13, "trans {l} {k}");
                }
            }
            // Without transpose: H_k first, then … H_1.
            let mut cref = c0.clone();
            for col in 1..=nc {
                for i in (0..k).rev() {
                    let cc = &mut cref.col_mut(col)[1 + i..1 + l];
                    apply_left(&v.col(i)[i + 1..], tau[i], cc);
                }
            }
            let mut c = c0.clone();
            larfb_left(&v, &t, false, &mut c, 1, 1..nc + 1);
            for j in 0..c.ncols() {
                for i in 0..c.nrows() {
                    assert!((c[(i, j)] - cref[(i, j)]).abs() < 1e-13, "notrans {l} {k}");
                }
            }
            // Right application: C(I − VTVᵀ) = ((I − VTᵀVᵀ)Cᵀ)ᵀ.
            let q0 = Mat::from_fn(nc + 2, l + 3, |_, _| rng.random_range(-1.0..1.0));
            let mut q = q0.clone();
            larfb_right(&v, &t, &mut q, 2);
            let mut qt = q0.transpose();
            larfb_left(&v, &t, true, &mut qt, 2, 0..nc + 2);
            let qt = qt.transpose();
            for j in 0..q.ncols() {
                for i in 0..q.nrows() {
                    assert!((q[(i, j)] - qt[(i, j)]).abs() < 1e-13, "right {l} {k}");
                }
            }
        }
    }

    #[test]
    fn zero_block_size_is_refused() {
        assert!(matches!(
            resolve_block_size("t", Some(0), 5),
            Err(Error::InvalidParam { .. })
        ));
        assert_eq!(resolve_block_size("t", Some(3), 5).unwrap(), 3);
        assert_eq!(resolve_block_size("t", None, 500).unwrap(), 50);
    }
}
