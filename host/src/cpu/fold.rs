//! Rows folded into a triangular factor by block reflectors
//! (docs/algorithms.md#blocked-row-folding): the QR factorisation of [R; U] with R n×n
//! upper triangular and U p×n, block column by block column. Reflector j is
//! H_j = I − τ_j v_j v_jᵀ with v_j = e_j (row j of R) + V_U(:, j) (the p rows of U); a
//! block of n_b of them is I − V T Vᵀ with T from V_Uᵀ V_U alone (the unit parts are
//! orthogonal), and the trailing columns, d and e take it by three products.
#![forbid(unsafe_code)]

use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{MatMut, MatRef};

use crate::base::mat::Mat;
use crate::base::scalar::Scalar;
use crate::cpu::dense::{gemm_add, gemm_set, product, view, view_mut};
use crate::cpu::householder::house;
use crate::cpu::wy::larft_from_gram;

/// The block reflectors of a fold: V_U (p×n, column j the tail of v_j) and, per block of
/// columns j0..j0+jb, its triangular factor T (jb×jb).
pub struct FoldBlocks<T> {
    /// The reflectors' parts in the folded rows (p×n).
    pub vu: Mat<T>,
    /// (j0, T) per block, in order.
    pub blocks: Vec<(usize, Mat<T>)>,
}

/// Folds the p rows `u` (p×n) with right-hand-side rows `e` (p×q) into the first n rows
/// of R (upper triangular there) and of d, by block reflectors of `nb` columns: afterwards
/// R'ᵀR' = RᵀR + UᵀU on those rows, U is zero, and e holds the rotated-out residual parts.
/// Returns the reflectors for the orthogonal factor ([`apply_to_columns`]).
pub fn fold_rows<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    u: &mut Mat<T>,
    e: &mut Mat<T>,
    nb: usize,
) -> FoldBlocks<T> {
    let (p, n) = (u.nrows(), u.ncols());
    let q = d.ncols();
    let mut vu = Mat::<T>::zeros(p, n);
    let mut blocks = Vec::new();
    if p == 0 || n == 0 {
        return FoldBlocks { vu, blocks };
    }
    let nb = nb.clamp(1, n);
    let mut j0 = 0;
    while j0 < n {
        let jb = nb.min(n - j0);
        let mut tau = Vec::with_capacity(jb);
        // The panel, reflector by reflector (level 2, p·jb² work).
        for j in j0..j0 + jb {
            let (beta, t) = house(r[(j, j)], u.col_mut(j));
            r[(j, j)] = beta;
            vu.col_mut(j).copy_from_slice(u.col(j));
            u.col_mut(j).fill(T::ZERO);
            tau.push(t);
            if t == T::ZERO {
                continue;
            }
            for c in j + 1..j0 + jb {
                let (v, uc) = (vu.col(j), u.col_mut(c));
                let mut w = r[(j, c)];
                for (&vk, &x) in v.iter().zip(uc.iter()) {
                    w = vk.mul_add(x, w);
                }
                let tw = t * w;
                r[(j, c)] -= tw;
                for (x, &vk) in uc.iter_mut().zip(v) {
                    *x = (-tw).mul_add(vk, *x);
                }
            }
        }
        let vb = view(&vu).subcols(j0, jb);
        let gram = product(vb.transpose(), vb);
        let t = larft_from_gram(&gram, &tau);
        // The trailing columns of [R; U], then [d; e]: (I − V T Vᵀ)ᵀ applied.
        let rest = n - j0 - jb;
        if rest > 0 {
            let (top, bot) = (
                view_mut(r).submatrix_mut(j0, j0 + jb, jb, rest),
                view_mut(u).subcols_mut(j0 + jb, rest),
            );
            apply_transpose(vb, view(&t), top, bot);
        }
        if q > 0 {
            let (top, bot) = (view_mut(d).subrows_mut(j0, jb), view_mut(e));
            apply_transpose(vb, view(&t), top, bot);
        }
        blocks.push((j0, t));
        j0 += jb;
    }
    FoldBlocks { vu, blocks }
}

/// [top; bot] ← (I − V T Vᵀ)ᵀ [top; bot] for V = [I; vb]: W = Tᵀ(top + vbᵀ bot);
/// top −= W; bot −= vb W.
fn apply_transpose<T: Scalar>(
    vb: MatRef<'_, T>,
    t: MatRef<'_, T>,
    mut top: MatMut<'_, T>,
    mut bot: MatMut<'_, T>,
) {
    let mut w = top.to_owned();
    gemm_add(w.as_mut(), vb.transpose(), bot.rb(), T::ONE);
    let mut tw = faer::Mat::<T>::zeros(w.nrows(), w.ncols());
    gemm_set(tw.as_mut(), t.transpose(), w.as_ref(), T::ONE);
    faer::zip!(top.rb_mut(), tw.as_ref()).for_each(|faer::unzip!(x, y)| *x -= *y);
    gemm_add(bot.rb_mut(), vb, tw.as_ref(), -T::ONE);
}

/// Applies the fold's reflectors to the orthogonal factor from the right: for each block,
/// [Qc X] ← [Qc X](I − V T Vᵀ) where `qc` holds the columns of R's rows (0..n) and `x`
/// the p columns of the folded rows: W = (Qc(:, blk) + X V_U(:, blk)) T;
/// Qc(:, blk) −= W; X −= W V_U(:, blk)ᵀ.
pub fn apply_to_columns<T: Scalar>(
    fold: &FoldBlocks<T>,
    mut qc: MatMut<'_, T>,
    mut x: MatMut<'_, T>,
) {
    for (j0, t) in &fold.blocks {
        let jb = t.nrows();
        let vb = view(&fold.vu).subcols(*j0, jb);
        let mut w = qc.rb().subcols(*j0, jb).to_owned();
        gemm_add(w.as_mut(), x.rb(), vb, T::ONE);
        let mut wt = faer::Mat::<T>::zeros(w.nrows(), jb);
        gemm_set(wt.as_mut(), w.as_ref(), view(t), T::ONE);
        faer::zip!(qc.rb_mut().subcols_mut(*j0, jb), wt.as_ref())
            .for_each(|faer::unzip!(a, b)| *a -= *b);
        gemm_add(x.rb_mut(), wt.as_ref(), vb.transpose(), -T::ONE);
    }
}
