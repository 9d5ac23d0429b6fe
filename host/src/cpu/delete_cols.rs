//! Column deletion on the CPU for the full kind (docs/algorithms.md#column-deletion): R's
//! columns shifted left, then banded block reflectors restore triangularity. The operation
//! (`ops/delete_cols/`) validates and dispatches.
#![forbid(unsafe_code)]

use crate::base::dims::check_rank_of;
use crate::base::error::Result;
use crate::base::mat::Mat;
use crate::base::scalar::Scalar;
use crate::cpu::dense::{block_left, block_right};
use crate::cpu::factors::FactorsMut;
use crate::cpu::householder::{apply_left_split, house};
use crate::cpu::wy::larft;

/// Deletes columns k0..k0+p of a full-kind state's A (n_new = n − p columns left) with
/// reflector blocks of `nb`, updating R, d and Q (docs/algorithms.md#column-deletion). R's
/// strictly lower part stays exactly 0.
///
/// # Errors
/// [`crate::Error::RankDeficient`] if the updated R fails the state's rank test; the
/// state is then unchanged (the result is computed in new buffers first).
pub(crate) fn delete_cols_full<T: Scalar>(
    st: FactorsMut<'_, T>,
    k0: usize,
    p: usize,
    nb: usize,
) -> Result<()> {
    let nn = st.dims.n - p;
    let m = st.dims.m;
    let mut r = Mat::from_fn(m, nn, |i, j| {
        if j < k0 {
            st.r[(i, j)]
        } else {
            st.r[(i, j + p)]
        }
    });
    if k0 == nn {
        check_rank_of(&r, nn, st.rank_tol)?;
        *st.r = r;
        st.dims.n = nn;
        return Ok(());
    }
    let mut d = st.d.clone();
    // The blocked path updates Q in place once R has passed the rank test (nothing can
    // fail after it): the blocks are kept until then. The reference works on a copy.
    let in_place = !crate::cpu::reference::active();
    let mut q = if in_place { None } else { st.q.clone() };
    let mut blocks = Vec::new();
    let mut c0 = k0;
    while c0 < nn {
        let jb = nb.min(nn - c0);
        let l = p + jb; // rows c0..c0+p+jb (docs/algorithms.md#column-deletion-block-height)
        let mut v = Mat::<T>::zeros(l, jb);
        let mut tau = Vec::with_capacity(jb);
        // Panel: reflector c acts on rows c..=c+p; c+p ≤ n−1 < m.
        for c in c0..c0 + jb {
            let i = c - c0;
            let (head, tail) = r.col_mut(c)[c..c + p + 1]
                .split_first_mut()
                .expect("p + 1 ≥ 1 rows");
            let (beta, t) = house(*head, tail);
            *head = beta;
            let vi = v.col_mut(i);
            vi[i] = T::ONE;
            vi[i + 1..i + 1 + p].copy_from_slice(tail);
            tail.fill(T::ZERO);
            tau.push(t);
            for cc in c + 1..c0 + jb {
                let (h, tl) = r.col_mut(cc)[c..c + p + 1]
                    .split_first_mut()
                    .expect("p + 1 ≥ 1 rows");
                apply_left_split(&v.col(i)[i + 1..i + 1 + p], t, h, tl);
            }
        }
        let t = larft(&v, &tau);
        // Only rows c0..c0+p+jb of the trailing columns, of d and columns of Q change.
        block_left(&v, &t, true, &mut r, c0, c0 + jb..nn);
        block_left(&v, &t, true, &mut d, c0, 0..st.dims.q);
        if let Some(qm) = q.as_mut() {
            block_right(&v, &t, qm, c0);
        }
        if in_place {
            blocks.push((v, t, c0));
        }
        c0 += jb;
    }
    check_rank_of(&r, nn, st.rank_tol)?;
    if in_place {
        if let Some(qm) = st.q.as_mut() {
            for (v, t, c0) in &blocks {
                block_right(v, t, qm, *c0);
            }
        }
    } else {
        *st.q = q;
    }
    *st.r = r;
    *st.d = d;
    st.dims.n = nn;
    Ok(())
}
