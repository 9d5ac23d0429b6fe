//! Updates of a thin factorisation A = Q₁R (Q₁ m×n with orthonormal columns, R n×n upper
//! triangular) with d = Q₁ᵀb and the right-hand sides b kept (docs/algorithms.md#thin-q-updates).
//! Every operation touches Q₁ by O(m·n·p) work at most: nothing is m×m.
#![forbid(unsafe_code)]

use crate::base::mat::Mat;
use crate::base::scalar::Scalar;
use crate::cpu::givens::{givens, rot_pair};
use crate::cpu::householder::{apply_left_split, nrm2};
use crate::cpu::rfactor;

pub(crate) use crate::base::refusal::ThinFailure;

/// Q₁ᵀU and U − Q₁(Q₁ᵀU), classical Gram–Schmidt repeated once ("twice is enough").
pub fn project_out<T: Scalar>(q1: &Mat<T>, u: &Mat<T>) -> (Mat<T>, Mat<T>) {
    let qt = q1.transpose();
    let mut c = qt.matmul(u);
    let mut z = u.clone();
    sub_product(&mut z, q1, &c);
    let c2 = qt.matmul(&z);
    sub_product(&mut z, q1, &c2);
    for (x, y) in c.as_mut_slice().iter_mut().zip(c2.as_slice()) {
        *x += *y;
    }
    (c, z)
}

/// z −= a·b.
fn sub_product<T: Scalar>(z: &mut Mat<T>, a: &Mat<T>, b: &Mat<T>) {
    let ab = a.matmul(b);
    for (x, y) in z.as_mut_slice().iter_mut().zip(ab.as_slice()) {
        *x -= *y;
    }
}

/// Thin QR of Z (m×p) by modified Gram–Schmidt with one reorthogonalisation against the
/// columns already made: (Q_z, G) with Z = Q_z G. A column whose norm falls below
/// `tol`·(its norm before) is reported.
pub(crate) fn thin_qr<T: Scalar>(
    z: &Mat<T>,
    base: &[f64],
    tol: f64,
) -> Result<(Mat<T>, Mat<T>), ThinFailure> {
    let p = z.ncols();
    let mut qz = z.clone();
    let mut g = Mat::<T>::zeros(p, p);
    for j in 0..p {
        for _pass in 0..2 {
            for k in 0..j {
                let (ck, cj) = qz.two_cols_mut(k, j);
                let s = dot_lanes(ck, cj);
                g[(k, j)] += s;
                for (y, x) in cj.iter_mut().zip(ck.iter()) {
                    *y = (-s).mul_add(*x, *y);
                }
            }
        }
        let nrm = nrm2(qz.col(j));
        let rel = nrm.to_f64() / base[j].max(f64::MIN_POSITIVE);
        if rel.is_nan() || rel <= tol {
            return Err(ThinFailure::DependentColumn {
                column: j,
                relative_norm: rel,
            });
        }
        g[(j, j)] = nrm;
        for x in qz.col_mut(j) {
            *x /= nrm;
        }
    }
    Ok((qz, g))
}

/// xᵀy in eight interleaved partial sums (independent multiply-add chains, which the
/// compiler keeps in SIMD registers), added pairwise at the end.
fn dot_lanes<T: Scalar>(x: &[T], y: &[T]) -> T {
    const L: usize = 8;
    let mut acc = [T::ZERO; L];
    let (xc, yc) = (x.chunks_exact(L), y.chunks_exact(L));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (a, b) in xc.zip(yc) {
        for t in 0..L {
            acc[t] = a[t].mul_add(b[t], acc[t]);
        }
    }
    for (t, (a, b)) in xr.iter().zip(yr).enumerate() {
        acc[t] = a.mul_add(*b, acc[t]);
    }
    let quads = [
        acc[0] + acc[4],
        acc[1] + acc[5],
        acc[2] + acc[6],
        acc[3] + acc[7],
    ];
    (quads[0] + quads[2]) + (quads[1] + quads[3])
}

/// Qᵀb for the m×q b.
fn at_b<T: Scalar>(q: &Mat<T>, b: &Mat<T>) -> Mat<T> {
    q.transpose().matmul(b)
}

/// Rotates columns (i−1, i) of `q`.
fn rot_cols<T: Scalar>(q: &mut Mat<T>, i: usize, c: T, s: T) {
    let (x, y) = q.two_cols_mut(i - 1, i);
    for (a, b) in x.iter_mut().zip(y.iter_mut()) {
        rot_pair(c, s, a, b);
    }
}

/// Inserts the m×p block `u` as columns k0..k0+p (docs/algorithms.md#thin-column-insertion):
/// Q₁ᵀU and the residual by Gram–Schmidt twice, a thin QR of the residual, then Givens
/// rotations restore R and are applied to [Q₁ Q_z]. `tol` is the relative norm below
/// which a new column counts as dependent. On failure nothing is changed.
///
/// # Errors
/// [`ThinFailure::DependentColumn`].
pub fn insert_cols<T: Scalar>(
    q1: &mut Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &Mat<T>,
    k0: usize,
    u: &Mat<T>,
    tol: f64,
) -> Result<(), ThinFailure> {
    let (m, n, p) = (q1.nrows(), q1.ncols(), u.ncols());
    let (c, z) = project_out(q1, u);
    let base: Vec<f64> = (0..p).map(|j| nrm2(u.col(j)).to_f64()).collect();
    let (qz, g) = thin_qr(&z, &base, tol)?;
    let f = at_b(&qz, b);
    let mut qext = Mat::from_fn(
        m,
        n + p,
        |i, j| if j < n { q1[(i, j)] } else { qz[(i, j - n)] },
    );
    rfactor::insert_cols(r, d, k0, &c, &g, &f, |i, cs, sn| {
        rot_cols(&mut qext, i, cs, sn)
    });
    *q1 = qext;
    Ok(())
}

/// Deletes columns k0..k0+p (docs/algorithms.md#column-deletion): R's band re-triangularised
/// by Householder reflectors applied to Q₁'s columns, then Q₁'s last p columns and d's last
/// p rows dropped.
pub fn delete_cols<T: Scalar>(
    q1: &mut Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    k0: usize,
    p: usize,
) {
    let (m, n) = (q1.nrows(), q1.ncols());
    rfactor::delete_cols_with(r, d, k0, p, |j, tail, tau| {
        let mut row = vec![T::ZERO; tail.len()];
        for i in 0..m {
            let mut head = q1[(i, j)];
            for (t, k) in row.iter_mut().zip(j + 1..) {
                *t = q1[(i, k)];
            }
            // (Q H)(i, :) = H applied to Q's row i (H symmetric).
            apply_left_split(tail, tau, &mut head, &mut row);
            q1[(i, j)] = head;
            for (t, k) in row.iter().zip(j + 1..) {
                q1[(i, k)] = *t;
            }
        }
    });
    *q1 = Mat::from_fn(m, n - p, |i, j| q1[(i, j)]);
}

/// Inserts the p×n rows `u` with right-hand sides `e` (p×q) as rows k0..k0+p
/// (docs/algorithms.md#thin-row-insertion): Householder reflectors fold U into R; each
/// acts on one column of Q₁ and the p unit columns of the new rows, which are dropped at
/// the end.
pub fn insert_rows<T: Scalar>(
    q1: &mut Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &mut Mat<T>,
    k0: usize,
    u: &Mat<T>,
    e: &Mat<T>,
) {
    let (m, n, p, q) = (q1.nrows(), q1.ncols(), u.nrows(), d.ncols());
    // Q_ext: rows of Q₁ with the new rows at k0..k0+p; columns n..n+p their unit vectors.
    let old_row = |i: usize| {
        if i < k0 {
            Some(i)
        } else if i < k0 + p {
            None
        } else {
            Some(i - p)
        }
    };
    let mut qext = Mat::from_fn(m + p, n + p, |i, j| match (old_row(i), j < n) {
        (Some(oi), true) => q1[(oi, j)],
        (None, false) => {
            if i - k0 == j - n {
                T::ONE
            } else {
                T::ZERO
            }
        }
        _ => T::ZERO,
    });
    let mut w = u.clone();
    let mut ee = e.clone();
    let mut row = vec![T::ZERO; p];
    rfactor::add_rows_with(r, d, &mut w, &mut ee, |j, v, tau| {
        // Q_ext ← Q_ext·H on columns {j} ∪ {n..n+p}.
        for i in 0..m + p {
            let mut head = qext[(i, j)];
            for (t, k) in row.iter_mut().zip(n..n + p) {
                *t = qext[(i, k)];
            }
            apply_left_split(v, tau, &mut head, &mut row);
            qext[(i, j)] = head;
            for (t, k) in row.iter().zip(n..n + p) {
                qext[(i, k)] = *t;
            }
        }
    });
    *q1 = Mat::from_fn(m + p, n, |i, j| qext[(i, j)]);
    *b = Mat::from_fn(m + p, q, |i, k| match old_row(i) {
        Some(oi) => b[(oi, k)],
        None => e[(i - k0, k)],
    });
}

/// Deletes rows k0..k0+p (docs/algorithms.md#thin-row-deletion): the deleted rows' unit
/// vectors are completed against Q₁ by Gram–Schmidt with reorthogonalisation to V (m×p),
/// then the rotations of the full-Q deletion run on [Q₁ V] (n+p columns), R stacked over
/// p zero rows, and d stacked over Vᵀb; the first p columns and rows are dropped.
/// `tol` bounds ‖(I − Q₁Q₁ᵀ)e‖ from below. On failure nothing is changed.
///
/// # Errors
/// [`ThinFailure::IllDeterminedCompletion`].
pub fn delete_rows<T: Scalar>(
    q1: &mut Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &mut Mat<T>,
    k0: usize,
    p: usize,
    tol: f64,
) -> Result<(), ThinFailure> {
    let (m, n, q) = (q1.nrows(), q1.ncols(), d.ncols());
    let units = Mat::from_fn(m, p, |i, j| if i == k0 + j { T::ONE } else { T::ZERO });
    let (_, z) = project_out(q1, &units);
    let base = vec![1.0; p];
    let (v, _) = thin_qr(&z, &base, tol).map_err(|e| match e {
        ThinFailure::DependentColumn {
            column,
            relative_norm,
        } => ThinFailure::IllDeterminedCompletion {
            row: column,
            norm: relative_norm,
        },
        other => other,
    })?;
    let np = n + p;
    let mut qa = Mat::from_fn(m, np, |i, j| if j < n { q1[(i, j)] } else { v[(i, j - n)] });
    let mut ra = Mat::from_fn(np, n, |i, j| if i < n { r[(i, j)] } else { T::ZERO });
    let vtb = at_b(&v, b);
    let mut da = Mat::from_fn(
        np,
        q,
        |i, k| if i < n { d[(i, k)] } else { vtb[(i - n, k)] },
    );
    for i in 0..p {
        let zi = k0 + i;
        for j in (i + 1..np).rev() {
            let (c, s, rho) = givens(qa[(zi, j - 1)], qa[(zi, j)]);
            rot_cols(&mut qa, j, c, s);
            qa[(zi, j - 1)] = rho;
            qa[(zi, j)] = T::ZERO;
            // While row i is processed R has i sub-diagonals: rows ≥ n+i are zero.
            if j - 1 < n + i {
                for col in (j - 1).saturating_sub(i)..n {
                    let (mut x, mut y) = (ra[(j - 1, col)], ra[(j, col)]);
                    rot_pair(c, s, &mut x, &mut y);
                    ra[(j - 1, col)] = x;
                    ra[(j, col)] = y;
                }
            }
            for k in 0..q {
                let (mut x, mut y) = (da[(j - 1, k)], da[(j, k)]);
                rot_pair(c, s, &mut x, &mut y);
                da[(j - 1, k)] = x;
                da[(j, k)] = y;
            }
        }
    }
    let kept = |i: usize| if i < k0 { i } else { i + p };
    *q1 = Mat::from_fn(m - p, n, |i, j| qa[(kept(i), j + p)]);
    *r = Mat::from_fn(n, n, |i, j| if i <= j { ra[(i + p, j)] } else { T::ZERO });
    *d = Mat::from_fn(n, q, |i, k| da[(i + p, k)]);
    *b = Mat::from_fn(m - p, q, |i, k| b[(kept(i), k)]);
    Ok(())
}

/// Replaces A by A + u vᵀ (docs/algorithms.md#thin-rank-one-update): w = Q₁ᵀu and the unit
/// residual direction q̂ (Gram–Schmidt twice), then the rotations of the full-Q update on
/// [Q₁ q̂] and [R; 0]: stage A reduces [w; γ] to a multiple of e₁, stage B restores the
/// Hessenberg R to triangular; q̂'s column and the last row are dropped.
pub fn rank_one<T: Scalar>(
    q1: &mut Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &Mat<T>,
    u: &[T],
    v: &[T],
) {
    let (m, n) = (q1.nrows(), q1.ncols());
    let (c, z) = project_out(q1, &Mat::from_col(u));
    let gamma = nrm2(z.col(0));
    let unorm = nrm2(u).to_f64();
    let has_dir = gamma.to_f64() > 64.0 * T::UNIT_ROUNDOFF * unorm && gamma > T::ZERO;
    let qhat: Vec<T> = if has_dir {
        z.col(0).iter().map(|x| *x / gamma).collect()
    } else {
        vec![T::ZERO; m]
    };
    let mut w: Vec<T> = c.col(0).to_vec();
    w.push(if has_dir { gamma } else { T::ZERO });
    let mut qa = Mat::from_fn(m, n + 1, |i, j| if j < n { q1[(i, j)] } else { qhat[i] });
    let qtb = at_b(&Mat::from_col(&qhat), b);
    let f: Vec<T> = (0..d.ncols()).map(|k| qtb[(0, k)]).collect();
    rfactor::rank_one(r, d, w, &f, v, |i, cs, sn| rot_cols(&mut qa, i, cs, sn));
    *q1 = Mat::from_fn(m, n, |i, j| qa[(i, j)]);
}

/// The residual norms ‖bⱼ − Q₁dⱼ‖ of a thin state.
pub fn residual_norms<T: Scalar>(q1: &Mat<T>, d: &Mat<T>, b: &Mat<T>) -> Vec<f64> {
    let qd = q1.matmul(d);
    (0..b.ncols())
        .map(|k| {
            let res: Vec<f64> = (0..b.nrows())
                .map(|i| b[(i, k)].to_f64() - qd[(i, k)].to_f64())
                .collect();
            nrm2(&res)
        })
        .collect()
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

    /// Thin Q₁, R, d of (a, b) by modified Gram–Schmidt twice (a test oracle only).
    fn thin_factor(a: &Mat<f64>, b: &Mat<f64>) -> (Mat<f64>, Mat<f64>, Mat<f64>) {
        let base: Vec<f64> = (0..a.ncols()).map(|j| nrm2(a.col(j))).collect();
        let (q1, r) = thin_qr(a, &base, 1e-12).unwrap();
        let d = at_b(&q1, b);
        (q1, r, d)
    }

    /// ‖Q₁ᵀQ₁ − I‖_max, ‖Q₁R − A‖_max/‖A‖, max |R(i,j)| below the diagonal, and
    /// ‖d − Q₁ᵀb‖_max.
    fn check(q1: &Mat<f64>, r: &Mat<f64>, d: &Mat<f64>, a: &Mat<f64>, b: &Mat<f64>) -> f64 {
        let n = q1.ncols();
        let qtq = q1.transpose().matmul(q1);
        let mut e: f64 = 0.0;
        for i in 0..n {
            for j in 0..n {
                e = e.max((qtq[(i, j)] - if i == j { 1.0 } else { 0.0 }).abs());
                if i > j {
                    assert_eq!(r[(i, j)], 0.0, "R({i},{j}) below the diagonal");
                }
            }
        }
        let qr = q1.matmul(r);
        let an = a.norm_fro();
        for i in 0..a.nrows() {
            for j in 0..n {
                e = e.max((qr[(i, j)] - a[(i, j)]).abs() / an);
            }
        }
        let qtb = at_b(q1, b);
        for i in 0..n {
            for k in 0..b.ncols() {
                e = e.max((qtb[(i, k)] - d[(i, k)]).abs());
            }
        }
        e
    }

    #[test]
    fn every_thin_update_keeps_q_orthonormal_and_a_equal_to_qr() {
        let mut seed = 5;
        let (m, n, q) = (67, 9, 2);
        let mut a = random(m, n, &mut seed);
        let mut b = random(m, q, &mut seed);
        let (mut q1, mut r, mut d) = thin_factor(&a, &b);
        let tol = 1e-10;
        let bound = 10.0 * 100.0 * f64::EPSILON; // 10·m·u with margin for m ≈ 100

        // column insertion at k0 = 3, p = 2
        let u = random(a.nrows(), 2, &mut seed);
        insert_cols(&mut q1, &mut r, &mut d, &b, 3, &u, tol).unwrap();
        a = Mat::from_fn(a.nrows(), n + 2, |i, j| match j {
            0..=2 => a[(i, j)],
            3..=4 => u[(i, j - 3)],
            _ => a[(i, j - 2)],
        });
        assert!(check(&q1, &r, &d, &a, &b) < bound, "insert_cols");

        // column deletion of 3 columns at 1
        delete_cols(&mut q1, &mut r, &mut d, 1, 3);
        a = Mat::from_fn(a.nrows(), a.ncols() - 3, |i, j| {
            a[(i, if j < 1 { j } else { j + 3 })]
        });
        assert!(check(&q1, &r, &d, &a, &b) < bound, "delete_cols");

        // row insertion of 4 rows at 10
        let nn = a.ncols();
        let u = random(4, nn, &mut seed);
        let e = random(4, q, &mut seed);
        insert_rows(&mut q1, &mut r, &mut d, &mut b, 10, &u, &e);
        a = Mat::from_fn(a.nrows() + 4, nn, |i, j| match i {
            0..=9 => a[(i, j)],
            10..=13 => u[(i - 10, j)],
            _ => a[(i - 4, j)],
        });
        assert!(check(&q1, &r, &d, &a, &b) < bound, "insert_rows");

        // row deletion of 5 rows at 20
        delete_rows(&mut q1, &mut r, &mut d, &mut b, 20, 5, tol).unwrap();
        a = Mat::from_fn(a.nrows() - 5, nn, |i, j| {
            a[(if i < 20 { i } else { i + 5 }, j)]
        });
        assert!(check(&q1, &r, &d, &a, &b) < bound, "delete_rows");

        // rank one
        let uu: Vec<f64> = (0..a.nrows()).map(|_| lcg(&mut seed)).collect();
        let vv: Vec<f64> = (0..nn).map(|_| lcg(&mut seed)).collect();
        rank_one(&mut q1, &mut r, &mut d, &b, &uu, &vv);
        for i in 0..a.nrows() {
            for j in 0..nn {
                a[(i, j)] += uu[i] * vv[j];
            }
        }
        assert!(check(&q1, &r, &d, &a, &b) < bound, "rank_one");

        // and x agrees with a fresh factorisation
        let (q0, r0, d0) = thin_factor(&a, &b);
        let (x, x0) = (rfactor::solve_upper(&r, &d), rfactor::solve_upper(&r0, &d0));
        for i in 0..nn {
            for k in 0..q {
                assert!((x[(i, k)] - x0[(i, k)]).abs() < 1e-10 * (1.0 + x0[(i, k)].abs()));
            }
        }
        let (rn, rn0) = (residual_norms(&q1, &d, &b), residual_norms(&q0, &d0, &b));
        for k in 0..q {
            assert!((rn[k] - rn0[k]).abs() < 1e-10 * (1.0 + rn0[k]));
        }
    }

    #[test]
    fn dependent_columns_and_lone_rows_are_refused_without_change() {
        let mut seed = 9;
        let (m, n) = (30, 5);
        let a = random(m, n, &mut seed);
        let b = random(m, 1, &mut seed);
        let (mut q1, mut r, mut d) = thin_factor(&a, &b);
        let snapshot = (q1.clone(), r.clone(), d.clone());
        // a combination of existing columns
        let u = Mat::from_fn(m, 1, |i, _| a[(i, 0)] - 2.0 * a[(i, 3)]);
        let out = insert_cols(&mut q1, &mut r, &mut d, &b, 2, &u, 1e-10);
        assert!(
            matches!(out, Err(ThinFailure::DependentColumn { column: 0, .. })),
            "{out:?}"
        );
        assert!((q1.clone(), r.clone(), d.clone()) == snapshot);
        // a row that alone spans a direction: A with row 7 the only one touching column 4
        let mut a2 = a.clone();
        for i in 0..m {
            if i != 7 {
                a2[(i, 4)] = 0.0;
            }
        }
        let (mut q1, mut r, mut d) = thin_factor(&a2, &b);
        let mut bb = b.clone();
        let snap = (q1.clone(), r.clone(), d.clone(), bb.clone());
        let out = delete_rows(&mut q1, &mut r, &mut d, &mut bb, 7, 1, 1e-10);
        assert!(
            matches!(
                out,
                Err(ThinFailure::IllDeterminedCompletion { row: 0, .. })
            ),
            "{out:?}"
        );
        assert!((q1, r, d, bb) == snap);
    }
}
