//! faer's blocked, cache-aware Householder QR for the CPU backend's factorisation
//! (docs/algorithms.md#blocked-householder-qr): the same algorithm as the reference
//! (`cpu::wy`), with faer's register-blocked kernels for the panels, the block factors and
//! every product. Used for f32 and f64, the types faer computes with; any other scalar type
//! keeps the reference.
#![forbid(unsafe_code)]

use std::any::Any;

use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::linalg::householder::{
    apply_block_householder_sequence_on_the_left_in_place_scratch,
    apply_block_householder_sequence_on_the_left_in_place_with_conj,
    apply_block_householder_sequence_transpose_on_the_left_in_place_scratch,
    apply_block_householder_sequence_transpose_on_the_left_in_place_with_conj,
};
use faer::linalg::qr::no_pivoting::factor::{
    qr_in_place, qr_in_place_scratch, recommended_block_size,
};
use faer::Conj;

use crate::base::mat::Mat;
use crate::base::scalar::Scalar;

/// Factorises the m×n `a` (m ≥ n) in place by faer's blocked Householder QR: afterwards R
/// is its upper triangle (the reflectors' essential parts are left below it), `d` (m×q) is
/// overwritten by Qᵀd, and, when `q_cols` is `Some(k)`, Q's first k columns (k = m for the
/// full Q, n for the thin Q₁) are returned. The block size is `block_size`, or faer's
/// recommendation for the shape. `None` when T is neither f32 nor f64 (the caller falls
/// back to the reference).
pub fn householder_qr<T: Scalar>(
    a: &mut Mat<T>,
    d: &mut Mat<T>,
    q_cols: Option<usize>,
    block_size: Option<usize>,
) -> Option<Option<Mat<T>>> {
    if let (Some(a), Some(d)) = (
        (a as &mut dyn Any).downcast_mut::<Mat<f64>>(),
        (d as &mut dyn Any).downcast_mut::<Mat<f64>>(),
    ) {
        return Some(match qr_on::<f64>(a, d, q_cols, block_size) {
            Some(q) => Some(*(Box::new(q) as Box<dyn Any>).downcast::<Mat<T>>().ok()?),
            None => None,
        });
    }
    if let (Some(a), Some(d)) = (
        (a as &mut dyn Any).downcast_mut::<Mat<f32>>(),
        (d as &mut dyn Any).downcast_mut::<Mat<f32>>(),
    ) {
        return Some(match qr_on::<f32>(a, d, q_cols, block_size) {
            Some(q) => Some(*(Box::new(q) as Box<dyn Any>).downcast::<Mat<T>>().ok()?),
            None => None,
        });
    }
    None
}

/// [`householder_qr`] for a type faer computes with.
fn qr_on<F: Scalar + faer::traits::ComplexField>(
    a: &mut Mat<F>,
    d: &mut Mat<F>,
    q_cols: Option<usize>,
    block_size: Option<usize>,
) -> Option<Mat<F>> {
    let (m, n, nrhs) = (a.nrows(), a.ncols(), d.ncols());
    let k = m.min(n);
    let par = crate::cpu::par_for(2.0 * m as f64 * n as f64 * n.max(1) as f64);
    let bs = block_size
        .unwrap_or_else(|| recommended_block_size::<F>(m, n))
        .clamp(1, k.max(1));
    let qc = q_cols.unwrap_or(0);
    let req = StackReq::any_of(&[
        qr_in_place_scratch::<F>(m, n, bs, par, Default::default()),
        apply_block_householder_sequence_transpose_on_the_left_in_place_scratch::<F>(
            m,
            bs,
            nrhs.max(1),
        ),
        apply_block_householder_sequence_on_the_left_in_place_scratch::<F>(m, bs, qc.max(1)),
    ]);
    let mut mem = MemBuffer::new(req);
    let stack = MemStack::new(&mut mem);
    let mut factors = faer::Mat::<F>::zeros(bs, k);
    let mut av = faer::MatMut::from_column_major_slice_mut(a.as_mut_slice(), m, n);
    if k > 0 {
        qr_in_place(
            av.as_mut(),
            factors.as_mut(),
            par,
            stack,
            Default::default(),
        );
    }
    let basis = av.as_ref().get(.., ..k);
    if nrhs > 0 && k > 0 {
        let dv = faer::MatMut::from_column_major_slice_mut(d.as_mut_slice(), m, nrhs);
        apply_block_householder_sequence_transpose_on_the_left_in_place_with_conj(
            basis,
            factors.as_ref(),
            Conj::No,
            dv,
            par,
            stack,
        );
    }
    q_cols.map(|cols| {
        let mut q = Mat::from_fn(m, cols, |i, j| if i == j { F::ONE } else { F::ZERO });
        if k > 0 && cols > 0 {
            let qv = faer::MatMut::from_column_major_slice_mut(q.as_mut_slice(), m, cols);
            apply_block_householder_sequence_on_the_left_in_place_with_conj(
                basis,
                factors.as_ref(),
                Conj::No,
                qv,
                par,
                stack,
            );
        }
        q
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// QR = A, QᵀQ = I and Qᵀb = d to a few units of roundoff, for the full and thin Q.
    #[test]
    fn factors_and_q_agree_with_a() {
        let (m, n) = (157, 37);
        let a0 = Mat::<f64>::from_fn(m, n, |i, j| {
            ((i * 31 + j * 17) % 23) as f64 / 7.0 - 1.3 + (i == j) as u8 as f64
        });
        let b0 = Mat::<f64>::from_fn(m, 2, |i, k| ((i * 13 + k * 5) % 11) as f64 - 4.5);
        for cols in [m, n] {
            let (mut a, mut d) = (a0.clone(), b0.clone());
            let q = householder_qr(&mut a, &mut d, Some(cols), None)
                .unwrap()
                .unwrap();
            let r = Mat::from_fn(
                cols,
                n,
                |i, j| if i <= j && i < n { a[(i, j)] } else { 0.0 },
            );
            let qr = Mat::from_fn(m, n, |i, j| {
                (0..cols.min(n)).map(|l| q[(i, l)] * r[(l, j)]).sum::<f64>()
            });
            let an = a0.norm_fro();
            let mut e: f64 = 0.0;
            for j in 0..n {
                for i in 0..m {
                    e = e.max((qr[(i, j)] - a0[(i, j)]).abs() / an);
                }
            }
            for x in 0..cols {
                for y in 0..cols {
                    let s: f64 = (0..m).map(|i| q[(i, x)] * q[(i, y)]).sum();
                    e = e.max((s - if x == y { 1.0 } else { 0.0 }).abs());
                }
            }
            for k in 0..2 {
                for l in 0..cols.min(m) {
                    let s: f64 = (0..m).map(|i| q[(i, l)] * b0[(i, k)]).sum();
                    e = e.max((s - d[(l, k)]).abs() / b0.norm_fro());
                }
            }
            assert!(e < 10.0 * m as f64 * f64::EPSILON, "cols {cols}: {e:e}");
        }
    }

    /// f32 takes faer's path too.
    #[test]
    fn f32_is_served() {
        let mut a = Mat::<f32>::from_fn(9, 4, |i, j| (i + 2 * j) as f32 + (i == j) as u8 as f32);
        let mut d = Mat::<f32>::from_fn(9, 1, |i, _| i as f32);
        assert!(householder_qr(&mut a, &mut d, None, Some(3)).is_some());
    }
}
