//! The CPU path.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::cpu::dense::{block_left, block_right};

/// Deletes columns k0..k0+p of A, updating R (m×(n−p)), d and, when held, Q
/// (docs/algorithms.md#column-deletion). R's strictly lower part stays exactly 0.
///
/// # Errors
/// The errors of `plan`; [`Error::InvalidParam`] for a block size of 0 in the state's
/// params; [`Error::RankDeficient`] if the updated R fails the state's rank test. On
/// any error the state is unchanged (the result is computed in new buffers first).
///
/// # Examples
/// ```
/// use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate};
/// let a = Mat::<f64>::from_fn(7, 4, |i, j| ((2 * i + 3 * j) % 5) as f64 + (i == j) as u8 as f64);
/// let b = Mat::<f64>::from_fn(7, 1, |i, _| i as f64);
/// let mut st = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::None, FactorParams::default()).unwrap();
/// st.delete_cols(1, 2).unwrap();
/// assert_eq!((st.nrows(), st.ncols()), (7, 2));
/// ```
pub fn run_cpu<T: Scalar>(st: &mut CpuQr<T>, k0: usize, p: usize) -> Result<()> {
    let plan = plan(st.dims, k0, p)?;
    if st.dims.policy != QPolicy::Full {
        return crate::cpu::reduced::delete_cols(st.factors_mut(), k0, p);
    }
    let nn = plan.n_new;
    let nb = resolve_block_size(OP, st.params.block_size, nn - k0)?;
    let m = st.dims.m;
    let mut r = Mat::from_fn(m, nn, |i, j| {
        if j < k0 {
            st.r[(i, j)]
        } else {
            st.r[(i, j + p)]
        }
    });
    if plan.is_truncation() {
        check_rank_of(&r, nn, st.rank_tol)?;
        st.r = r;
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
        st.q = q;
    }
    st.r = r;
    st.d = d;
    st.dims.n = nn;
    Ok(())
}
