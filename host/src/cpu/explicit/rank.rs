//! Rank-one updates A + u·vᴴ of explicit factors (docs/algorithms.md#explicit-factors).

use super::orth::{extend, project_out};
use super::rotation::Rotation;
use super::{sweep_in_parallel, BLOCK};
use super::{Factors, QStore};
use crate::base::error::Result;
use crate::base::field::Field;

/// A ← A + u·vᴴ (u of length m, v of length n).
///
/// w = Qᴴu is gathered into its first entry by rotations (i − 1, i) from the bottom (R
/// becomes upper Hessenberg), w₀·vᴴ is added to R's first row, and rotations (i, i + 1)
/// zero the subdiagonal again. An economic Q is first extended by u's part outside
/// range(Q) (a zero column when u lies in range(Q)) and w by its norm; the extra column
/// and R's zero last row are dropped at the end.
pub(crate) fn rank_one<T: Field, Q: QStore<T>>(
    f: &mut Factors<T, Q>,
    u: &[T],
    v: &[T],
) -> Result<()> {
    let economic = f.economic();
    let mut w = if economic {
        let p = project_out(&mut f.q, u)?;
        let unit = !p.in_span;
        extend(f, p, unit)?
    } else {
        f.q.adjoint_times(u)?
    };
    let (t, n) = (f.r.rows(), f.r.cols());
    // first sweep: made from w alone; rotation i (rows i − 1, i) meets columns c ≥ i − 1
    let mut up = Vec::with_capacity(t.saturating_sub(1));
    for i in (1..t).rev() {
        let (rot, rho) = Rotation::zeroing(i - 1, i, w[i - 1], w[i]);
        w[i - 1] = rho;
        w[i] = T::zero();
        f.q.rotate(rot.for_q())?;
        up.push(rot);
    }
    // then per column: the first sweep and w₀·v̄_c into row 0 (known rotations: the
    // column blocks are independent), and, in column order, the second sweep's rotations
    // so far and the one this column makes (each column sees what the row-by-row order
    // would apply to it, in the same order)
    let w0 = w.first().copied();
    let parallel = sweep_in_parallel::<T>(n * t / 2);
    f.r.blocks_mut(
        BLOCK,
        |c| t.min(c + 2),
        parallel,
        |c0, cols| {
            let common = up.partition_point(|r| r.top > c0);
            for (i, col) in cols.iter_mut().enumerate() {
                let first = up.partition_point(|r| r.top > c0 + i);
                Rotation::on_columns(&up[first..common], &mut [&mut **col]);
            }
            Rotation::on_columns(&up[common..], cols);
            if let Some(w0) = w0 {
                for (col, &vc) in cols.iter_mut().zip(&v[c0..]) {
                    col[0] += w0 * vc.conj();
                }
            }
        },
    );
    let lim = n.min(t.saturating_sub(1));
    let mut down: Vec<Rotation<T>> = Vec::new();
    let mut c0 = 0;
    while c0 < n {
        let c1 = (c0 + BLOCK).min(n);
        let mut cols = f.r.columns_mut(c0, c1, |c| t.min(c + 2));
        Rotation::on_columns(&down, &mut cols);
        for i in 0..cols.len() {
            let c = c0 + i;
            if c < lim {
                down.push(Rotation::make_subdiagonal(&mut cols, i, c));
            }
        }
        f.r.trim_cols(c0, c1);
        c0 = c1;
    }
    for rot in &down {
        f.q.rotate(rot.for_q())?;
    }
    if economic {
        f.q.pop_col()?;
        f.r.pop_row();
    }
    Ok(())
}
