//! The CPU path.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// Inserts the rows `u` (p×n) and right-hand-side rows `e` (p×q) so that they become rows
/// k0..k0+p of Ã and b̃ (docs/algorithms.md#row-insertion). Afterwards R̃ is (m+p)×n, d̃ = Q̃ᵀb̃
/// (the residual includes the transformed e) and, when held, Q̃ is (m+p)×(m+p) with Q̃R̃ = Ã.
///
/// # Errors
/// The errors of `plan`; [`Error::InvalidParam`] for a block size of 0 in the state's
/// params; [`Error::RankDeficient`] if the updated R fails the state's rank test. On
/// any error the state is unchanged (the result is built in new buffers first).
///
/// # Examples
/// ```
/// use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate};
/// let a = Mat::<f64>::from_fn(6, 3, |i, j| ((i + 2 * j) % 4) as f64 + (i == j) as u8 as f64);
/// let b = Mat::<f64>::from_fn(6, 1, |i, _| i as f64);
/// let mut st = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::Full, FactorParams::default()).unwrap();
/// st.insert_row(2, &[1.0, -2.0, 0.5], &[3.0]).unwrap();
/// assert_eq!(st.nrows(), 7);
/// ```
pub fn run_cpu<T: Scalar>(
    st: &mut CpuQr<T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<()> {
    let plan = plan(st.dims, k0, u, e)?;
    if st.dims.policy != QPolicy::Full {
        return crate::cpu::reduced::insert_rows(st.factors_mut(), k0, u, e);
    }
    let Dims { m, n, q, .. } = st.dims;
    let p = plan.p;
    let nb = resolve_block_size(OP, st.params.block_size, n)?;
    if !crate::cpu::reference::active() {
        return insert_rows_blocked(st, k0, u, e, nb, plan.m_new);
    }
    let mut r = st.r.clone();
    let mut d = st.d.clone();
    let mut uw = u.to_owned();
    let mut ew = e.to_owned();
    // M = diag(Q, I_p), accumulated as M·H₁⋯H_n; rows permuted at the end.
    let mut mq = st.q.as_ref().map(|qm| {
        let mut mm = Mat::<T>::zeros(m + p, m + p);
        for j in 0..m {
            mm.col_mut(j)[..m].copy_from_slice(qm.col(j));
        }
        for i in 0..p {
            mm[(m + i, m + i)] = T::ONE;
        }
        mm
    });

    let mut j0 = 0;
    while j0 < n {
        let jb = nb.min(n - j0);
        let mut vu = Mat::<T>::zeros(p, jb);
        let mut tau = Vec::with_capacity(jb);
        // Phase 1: reduce the block column by column (level 2).
        for j in j0..j0 + jb {
            let i = j - j0;
            let (beta, t) = house(r[(j, j)], uw.col_mut(j));
            r[(j, j)] = beta;
            vu.col_mut(i).copy_from_slice(uw.col(j));
            uw.col_mut(j).fill(T::ZERO);
            tau.push(t);
            if t == T::ZERO {
                continue;
            }
            let v = vu.col(i);
            for c in j + 1..j0 + jb {
                // w = R[j, c] + vᵀU[:, c]; R[j, c] −= τw; U[:, c] −= τ v w.
                let uc = uw.col_mut(c);
                let mut w = r[(j, c)];
                for (vk, &x) in v.iter().zip(uc.iter()) {
                    w = vk.mul_add(x, w);
                }
                let tw = t * w;
                r[(j, c)] -= tw;
                for (x, &vk) in uc.iter_mut().zip(v) {
                    *x = (-tw).mul_add(vk, *x);
                }
            }
        }
        // Phase 2: T from V_U only (the identity rows of V are orthogonal off the diagonal).
        let mut s = Mat::<T>::zeros(jb, jb);
        for b in 0..jb {
            for a in 0..b {
                let mut acc = T::ZERO;
                for (&x, &y) in vu.col(a).iter().zip(vu.col(b)) {
                    acc = x.mul_add(y, acc);
                }
                s[(a, b)] = acc;
            }
        }
        let t = larft_from_gram(&s, &tau);
        // Phase 3: trailing R rows and U, then d and e (both "R₁ + V_UᵀU₂" patterns).
        apply_block_rows(&vu, &t, &mut r, &mut uw, j0, j0 + jb..n);
        apply_block_rows(&vu, &t, &mut d, &mut ew, j0, 0..q);
        if let Some(mm) = mq.as_mut() {
            apply_block_q(&vu, &t, mm, j0, m);
        }
        j0 += jb;
    }

    // R̃ = [R; 0]: U has been reduced to exact zeros.
    let mut r_new = Mat::<T>::zeros(m + p, n);
    for j in 0..n {
        r_new.col_mut(j)[..m].copy_from_slice(r.col(j));
    }
    check_rank_of(&r_new, n, st.rank_tol)?;
    let mut d_new = Mat::<T>::zeros(m + p, q);
    for c in 0..q {
        d_new.col_mut(c)[..m].copy_from_slice(d.col(c));
        d_new.col_mut(c)[m..].copy_from_slice(ew.col(c));
    }
    // Q̃ = Pᵀ M: M's rows m..m+p move to k0..k0+p, its rows k0..m move down by p.
    let q_new = mq.map(|mm| {
        let src_row = |i: usize| {
            if i < k0 {
                i
            } else if i < k0 + p {
                m + (i - k0)
            } else {
                i - p
            }
        };
        Mat::from_fn(m + p, m + p, |i, j| mm[(src_row(i), j)])
    });
    st.r = r_new;
    st.d = d_new;
    st.q = q_new;
    st.dims.m = plan.m_new;
    Ok(())
}

/// Phase 3 of docs/algorithms.md#row-insertion on columns `cols` of a pair (top rows j0..j0+jb of
/// `top`, all rows of `bot`): W = Tᵀ(top[j0.., J] + V_Uᵀ bot[:, J]); top −= W; bot −= V_U W.
pub(super) fn apply_block_rows<T: Scalar>(
    vu: &Mat<T>,
    t: &Mat<T>,
    top: &mut Mat<T>,
    bot: &mut Mat<T>,
    j0: usize,
    cols: core::ops::Range<usize>,
) {
    let jb = vu.ncols();
    let mut w = vec![T::ZERO; jb];
    let mut w2 = vec![T::ZERO; jb];
    for c in cols {
        let bc = bot.col_mut(c);
        let tc = &mut top.col_mut(c)[j0..j0 + jb];
        for (i, wi) in w.iter_mut().enumerate() {
            let mut acc = tc[i];
            for (&x, &y) in vu.col(i).iter().zip(bc.iter()) {
                acc = x.mul_add(y, acc);
            }
            *wi = acc;
        }
        for (i, w2i) in w2.iter_mut().enumerate() {
            let mut acc = T::ZERO;
            for (r, &wr) in w.iter().enumerate().take(i + 1) {
                acc = t[(r, i)].mul_add(wr, acc);
            }
            *w2i = acc;
        }
        for (i, &wi) in w2.iter().enumerate() {
            tc[i] -= wi;
            if wi == T::ZERO {
                continue;
            }
            for (x, &vk) in bc.iter_mut().zip(vu.col(i)) {
                *x = (-wi).mul_add(vk, *x);
            }
        }
    }
}

/// M ← M (I − V T Vᵀ) for V = [I at rows j0..j0+jb; V_U at rows m..m+p]
/// (docs/algorithms.md#row-insertion [EXT]):
/// W = (M[:, j0..j0+jb] + M[:, m..] V_U) T; M[:, j0..j0+jb] −= W; M[:, m..] −= W V_Uᵀ.
pub(super) fn apply_block_q<T: Scalar>(
    vu: &Mat<T>,
    t: &Mat<T>,
    mm: &mut Mat<T>,
    j0: usize,
    m: usize,
) {
    let (p, jb) = (vu.nrows(), vu.ncols());
    let rows = mm.nrows();
    let mut w = Mat::<T>::zeros(rows, jb);
    for i in 0..jb {
        w.col_mut(i).copy_from_slice(mm.col(j0 + i));
        for k in 0..p {
            let s = vu[(k, i)];
            if s == T::ZERO {
                continue;
            }
            let (dst, src) = (w.col_mut(i), mm.col(m + k));
            for (dv, &x) in dst.iter_mut().zip(src) {
                *dv = x.mul_add(s, *dv);
            }
        }
    }
    crate::cpu::wy::times_upper_t(&mut w, t, jb);
    for i in 0..jb {
        let (dst, src) = (mm.col_mut(j0 + i), w.col(i));
        for (dv, &x) in dst.iter_mut().zip(src) {
            *dv -= x;
        }
    }
    for k in 0..p {
        let dst = mm.col_mut(m + k);
        for i in 0..jb {
            let s = vu[(k, i)];
            if s == T::ZERO {
                continue;
            }
            for (dv, &x) in dst.iter_mut().zip(w.col(i)) {
                *dv = (-s).mul_add(x, *dv);
            }
        }
    }
}

/// The full-Q row insertion on blocked building blocks: the rows folded into R by block
/// reflectors (docs/algorithms.md#blocked-row-folding) and each block applied to Q's
/// first n columns and the new rows' unit columns by faer products. The new rows sit at
/// k0..k0+p of Q̃ from the start (the reflectors mix columns only) and their unit
/// columns stay last, as in the reference's Pᵀ M.
fn insert_rows_blocked<T: Scalar>(
    st: &mut CpuQr<T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
    nb: usize,
    m_new: usize,
) -> Result<()> {
    use crate::cpu::dense::view_mut;
    use crate::cpu::fold::{apply_to_columns, fold_rows};
    let Dims { m, n, q, .. } = st.dims;
    let p = u.nrows();
    let mut r = st.r.clone();
    let mut d = st.d.clone();
    let mut ew = e.to_owned();
    let fold = fold_rows(&mut r, &mut d, &mut u.to_owned(), &mut ew, nb);
    let mut r_new = Mat::<T>::zeros(m + p, n);
    for j in 0..n {
        r_new.col_mut(j)[..m].copy_from_slice(r.col(j));
    }
    check_rank_of(&r_new, n, st.rank_tol)?;
    let mut d_new = Mat::<T>::zeros(m + p, q);
    for c in 0..q {
        d_new.col_mut(c)[..m].copy_from_slice(d.col(c));
        d_new.col_mut(c)[m..].copy_from_slice(ew.col(c));
    }
    let q_new = st.q.as_ref().map(|qm| {
        let mut out = Vec::with_capacity((m + p) * (m + p));
        for j in 0..m {
            let src = qm.col(j);
            out.extend_from_slice(&src[..k0]);
            out.extend(std::iter::repeat_n(T::ZERO, p));
            out.extend_from_slice(&src[k0..]);
        }
        for j in 0..p {
            out.extend((0..m + p).map(|i| if i == k0 + j { T::ONE } else { T::ZERO }));
        }
        let mut mm = Mat::from_col_major(m + p, m + p, out).expect("(m+p)² entries");
        let (left, right) = view_mut(&mut mm).split_at_col_mut(m);
        apply_to_columns(&fold, left.subcols_mut(0, n), right);
        mm
    });
    st.r = r_new;
    st.d = d_new;
    st.q = q_new;
    st.dims.m = m_new;
    Ok(())
}
