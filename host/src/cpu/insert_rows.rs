//! Row insertion on the CPU for the full kind (docs/algorithms.md#row-insertion): the
//! rows folded into R by compact-WY row reflectors, serially (the reference) or on the
//! blocked building blocks. The operation (`ops/insert_rows/`) validates and dispatches.
#![forbid(unsafe_code)]

use crate::base::dims::check_rank_of;
use crate::base::error::Result;
use crate::base::mat::{Mat, MatRef};
use crate::base::scalar::Scalar;
use crate::cpu::dense::view_mut;
use crate::cpu::factors::FactorsMut;
use crate::cpu::fold::{apply_to_columns, fold_rows, FoldBlocks};
use crate::cpu::householder::house;
use crate::cpu::wy::larft_from_gram;

/// Inserts the rows `u` (p×n) and right-hand-side rows `e` (p×q) of a full-kind state as
/// rows k0..k0+p of Ã and b̃, with reflector blocks of `nb` (docs/algorithms.md#row-insertion):
/// R̃ is (m+p)×n, d̃ = Q̃ᵀb̃ and Q̃ (m+p)×(m+p). R and d are built in new buffers and
/// checked first; Q then grows in its own buffer (docs/algorithms.md#factors-in-place).
///
/// # Errors
/// [`crate::Error::RankDeficient`] if the updated R fails the state's rank test; the
/// state is then unchanged.
pub(crate) fn insert_rows_full<T: Scalar>(
    st: FactorsMut<'_, T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
    nb: usize,
) -> Result<()> {
    let (m, p) = (st.dims.m, u.nrows());
    let mut r = st.r.clone();
    let mut d = st.d.clone();
    let mut ew = e.to_owned();
    if !crate::cpu::reference::active() {
        let fold = fold_rows(&mut r, &mut d, &mut u.to_owned(), &mut ew, nb);
        let (r_new, d_new) = stacked(&r, &d, &ew, st.rank_tol)?;
        if let Some(qm) = st.q.as_mut() {
            grow_q_in_place(qm, &fold, k0, p);
        }
        st.dims.m = r_new.nrows();
        *st.r = r_new;
        *st.d = d_new;
        return Ok(());
    }
    let mq = fold_reference(
        &mut r,
        &mut d,
        &mut u.to_owned(),
        &mut ew,
        st.q.as_ref(),
        nb,
    );
    // R̃ = [R; 0]: U has been reduced to exact zeros.
    let (r_new, d_new) = stacked(&r, &d, &ew, st.rank_tol)?;
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
    install(st, r_new, d_new, q_new);
    Ok(())
}

/// The reference's reduction of the rows `uw` (and their right-hand sides `ew`) into R and
/// d, block column by block column (docs/algorithms.md#row-insertion, phases 1 to 3), and
/// M = diag(Q, I_p)·H₁⋯H_n where Q is held.
fn fold_reference<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    uw: &mut Mat<T>,
    ew: &mut Mat<T>,
    q_old: Option<&Mat<T>>,
    nb: usize,
) -> Option<Mat<T>> {
    let (m, n, q, p) = (r.nrows(), r.ncols(), d.ncols(), uw.nrows());
    // M = diag(Q, I_p), accumulated as M·H₁⋯H_n; rows permuted at the end.
    let mut mq = q_old.map(|qm| {
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
        apply_block_rows(&vu, &t, r, uw, j0, j0 + jb..n);
        apply_block_rows(&vu, &t, d, ew, j0, 0..q);
        if let Some(mm) = mq.as_mut() {
            apply_block_q(&vu, &t, mm, j0, m);
        }
        j0 += jb;
    }
    mq
}

/// R̃ = [R; 0] (m+p rows) and d̃ = [d; e′], once R̃ has passed the rank test.
fn stacked<T: Scalar>(
    r: &Mat<T>,
    d: &Mat<T>,
    ew: &Mat<T>,
    rank_tol: f64,
) -> Result<(Mat<T>, Mat<T>)> {
    let (m, n, q, p) = (r.nrows(), r.ncols(), d.ncols(), ew.nrows());
    let mut r_new = Mat::<T>::zeros(m + p, n);
    for j in 0..n {
        r_new.col_mut(j)[..m].copy_from_slice(r.col(j));
    }
    check_rank_of(&r_new, n, rank_tol)?;
    let mut d_new = Mat::<T>::zeros(m + p, q);
    for c in 0..q {
        d_new.col_mut(c)[..m].copy_from_slice(d.col(c));
        d_new.col_mut(c)[m..].copy_from_slice(ew.col(c));
    }
    Ok((r_new, d_new))
}

/// Installs the new factors; the state's height grows by the inserted rows.
fn install<T: Scalar>(st: FactorsMut<'_, T>, r: Mat<T>, d: Mat<T>, q: Option<Mat<T>>) {
    st.dims.m = r.nrows();
    *st.r = r;
    *st.d = d;
    *st.q = q;
}

/// Phase 3 of docs/algorithms.md#row-insertion on columns `cols` of a pair (top rows j0..j0+jb of
/// `top`, all rows of `bot`): W = Tᵀ(top[j0.., J] + V_Uᵀ bot[:, J]); top −= W; bot −= V_U W.
fn apply_block_rows<T: Scalar>(
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
fn apply_block_q<T: Scalar>(vu: &Mat<T>, t: &Mat<T>, mm: &mut Mat<T>, j0: usize, m: usize) {
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

/// Q̃ on blocked building blocks, in Q's own buffer (docs/algorithms.md#factors-in-place):
/// p zero rows inserted at k0 and p unit columns e_{k0+i} appended (the reference's Pᵀ M
/// before its reflectors), then the rows folded into R by block reflectors
/// (docs/algorithms.md#blocked-row-folding) applied to Q's first n columns and the new
/// unit columns by faer products. Called only once the update has passed its rank test.
fn grow_q_in_place<T: Scalar>(qm: &mut Mat<T>, fold: &FoldBlocks<T>, k0: usize, p: usize) {
    let (m, n) = (qm.nrows(), fold.vu.ncols());
    qm.insert_zero_rows(k0, p);
    qm.append_cols_with(p, |i, j| if i == k0 + j { T::ONE } else { T::ZERO });
    let (left, right) = view_mut(qm).split_at_col_mut(m);
    apply_to_columns(fold, left.subcols_mut(0, n), right);
}
