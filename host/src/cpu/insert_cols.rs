//! Column insertion on the CPU for the full kind (docs/algorithms.md#column-insertion):
//! QᵀU into the widened R, the blocked Householder QR below row n, the Givens strip and
//! Q's recorded rotations. The operation (`ops/insert_cols/`) validates and dispatches.
#![forbid(unsafe_code)]

use crate::base::dims::Dims;
use crate::base::error::Result;
use crate::base::mat::{Mat, MatRef};
use crate::base::scalar::Scalar;
use crate::cpu::dense::{block_left, block_right};
use crate::cpu::dense::{product, view, view_mut};
use crate::cpu::factors::FactorsMut;
use crate::cpu::givens::{givens, rot, rot_rows};
use crate::cpu::householder::{apply_left, house};
use crate::cpu::reference;
use crate::cpu::rotations::ColumnTransforms;
use crate::cpu::wy::larft;

/// The shape of a validated column insertion (the operation's plan).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InsertColsParams {
    /// Rows m (unchanged).
    pub m: usize,
    /// Columns before the update.
    pub n: usize,
    /// Number of inserted columns.
    pub p: usize,
    /// First inserted column in the result (0-based, ≤ n).
    pub k0: usize,
    /// Householder block size n_b for step 2.
    pub nb: usize,
}

/// Inserts the m×p block `u` as columns k0..k0+p of a full-kind state's A
/// (docs/algorithms.md#column-insertion). R and d are updated in new buffers and the
/// transforms recorded; only once R has passed the rank test are they applied to Q, in its
/// own buffer (docs/algorithms.md#factors-in-place). The reference applies them as it goes,
/// to a copy of Q.
///
/// # Errors
/// [`crate::Error::RankDeficient`] when the new matrix is numerically rank deficient; the
/// state is then unchanged.
pub(crate) fn insert_cols_full<T: Scalar>(
    mut st: FactorsMut<'_, T>,
    u: MatRef<'_, T>,
    plan: &InsertColsParams,
) -> Result<()> {
    let InsertColsParams { m, n, p, k0, .. } = *plan;
    let q_old = st.q.as_ref().expect("a full state holds Q");
    let mut d = st.d.clone();
    // Step 0 + 1: R' = [R(:, 0:k0) | QᵀU | R(:, k0:n)].
    let mut r = Mat::<T>::zeros(m, n + p);
    for j in 0..k0 {
        r.col_mut(j).copy_from_slice(st.r.col(j));
    }
    for j in k0..n {
        r.col_mut(j + p).copy_from_slice(st.r.col(j));
    }
    let dims = Dims {
        n: n + p,
        ..*st.dims
    };
    if reference::active() {
        let mut q = q_old.clone();
        project_reference(&q, u, &mut r, k0);
        for panel in householder_below(&mut r, &mut d, plan) {
            panel.apply_right(&mut q);
        }
        givens_strip(&mut r, &mut d, plan, |a, b, cs, sn| {
            let (x, y) = q.two_cols_mut(a, b);
            rot(cs, sn, x, y);
        });
        clear_lower(&mut r);
        return st.replace_full(dims, r, d, q);
    }
    // The blocked path: QᵀU and the block reflectors on faer, Q's rotations recorded and
    // applied at the end in row blocks (docs/algorithms.md#blocked-column-transformations).
    let qtu = product(view(q_old).transpose(), u.as_faer());
    for j in 0..p {
        r.col_mut(k0 + j).copy_from_slice(qtu.col(j));
    }
    let panels = householder_below(&mut r, &mut d, plan);
    let mut steps = ColumnTransforms::new();
    givens_strip(&mut r, &mut d, plan, |a, b, cs, sn| {
        steps.rotate(a, b, cs, sn)
    });
    clear_lower(&mut r);
    // One block reflector for all the panels: Q is read and written once for them.
    let merged = Panel::merge(panels, m);
    st.replace_full_with(dims, r, d, |q| {
        if let Some(panel) = &merged {
            panel.apply_right(q);
        }
        steps.apply(view_mut(q));
    })
}

/// Step 1 of the reference: R'(:, k0..k0+p) = QᵀU by dot products.
fn project_reference<T: Scalar>(q: &Mat<T>, u: MatRef<'_, T>, r: &mut Mat<T>, k0: usize) {
    for j in 0..u.ncols() {
        let uj = u.col(j);
        for i in 0..q.ncols() {
            let mut acc = T::ZERO;
            for (a, b) in q.col(i).iter().zip(uj) {
                acc = a.mul_add(*b, acc);
            }
            r[(i, k0 + j)] = acc;
        }
    }
}

/// Step 3: Givens rotations on the strip R'(k0.., k0..k0+p) (skipped when appending,
/// docs/algorithms.md#column-insertion-schedule), applied to R's rows and d's and handed to
/// `rotate_q(a, b, c, s)` for Q's columns a and b.
fn givens_strip<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    plan: &InsertColsParams,
    mut rotate_q: impl FnMut(usize, usize, T, T),
) {
    let InsertColsParams { m, n, p, k0, .. } = *plan;
    if k0 >= n {
        return;
    }
    let nrhs = d.ncols();
    for j in 0..p {
        let c = k0 + j;
        let bottom = (n + j).min(m - 1);
        for row in (c + 1..=bottom).rev() {
            let (cs, sn, rho) = givens(r[(row - 1, c)], r[(row, c)]);
            r[(row - 1, c)] = rho;
            r[(row, c)] = T::ZERO;
            rot_rows(r, row - 1, row, cs, sn, c + 1..n + p);
            rotate_q(row - 1, row, cs, sn);
            rot_rows(d, row - 1, row, cs, sn, 0..nrhs);
        }
    }
}

/// Sets the strictly lower part of `r` to exact zeros.
pub(crate) fn clear_lower<T: Scalar>(r: &mut Mat<T>) {
    let m = r.nrows();
    for j in 0..r.ncols() {
        let col = r.col_mut(j);
        if j + 1 < m {
            col[j + 1..].fill(T::ZERO);
        }
    }
}

/// Step 2 (docs/algorithms.md#blocked-householder-qr on the block B = R'(n:m, k0:k0+p)):
/// panels of `nb` reflectors, each turned into the compact WY form I − V T Vᵀ (LAPACK sign,
/// docs/algorithms.md#block-reflector-sign) and applied to the trailing columns of B and to
/// d(n:m) from the left (`cpu::wy::larft`/`larfb_*`); returned for Q(:, n:m), from the right.
fn householder_below<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    plan: &InsertColsParams,
) -> Vec<Panel<T>> {
    let InsertColsParams { m, n, p, k0, nb } = *plan;
    let mut panels = Vec::new();
    if m <= n {
        return panels;
    }
    let ell = m - n;
    let c = p.min(ell);
    let mut j0 = 0;
    while j0 < c {
        let jb = nb.min(c - j0);
        let top = n + j0; // first row the panel's reflectors touch
        let mut taus = Vec::with_capacity(jb);
        // Panel: level-2 Householder on columns k0+j0 .. k0+j0+jb.
        for j in j0..j0 + jb {
            let (col, row) = (k0 + j, n + j);
            let cj = r.col_mut(col);
            let (head, tail) = cj[row..m].split_first_mut().expect("row < m");
            let (beta, tau) = house(*head, tail);
            *head = beta;
            taus.push(tau);
            for col2 in col + 1..k0 + j0 + jb {
                let (vc, cc) = r.two_cols_mut(col, col2);
                apply_left(&vc[row + 1..m], tau, &mut cc[row..m]);
            }
        }
        // V: (m − top) × jb with unit diagonal and zeros above it.
        let rows = m - top;
        let v = Mat::from_fn(rows, jb, |i, jj| {
            if i < jj {
                T::ZERO
            } else if i == jj {
                T::ONE
            } else {
                r[(top + i, k0 + j0 + jj)]
            }
        });
        let t = larft(&v, &taus);
        // Trailing columns of B and d: C := (I − V Tᵀ Vᵀ) C.
        block_left(&v, &t, true, r, top, k0 + j0 + jb..k0 + p);
        let nrhs = d.ncols();
        block_left(&v, &t, true, d, top, 0..nrhs);
        // The reflectors are stored; below the diagonal the block is now exactly zero.
        for jj in 0..jb {
            r.col_mut(k0 + j0 + jj)[top + jj + 1..m].fill(T::ZERO);
        }
        panels.push(Panel { v, t, top });
        j0 += jb;
    }
    panels
}

/// One block reflector I − V T Vᵀ of step 2, acting on Q's columns top.. from the right.
struct Panel<T> {
    v: Mat<T>,
    t: Mat<T>,
    top: usize,
}

impl<T: Scalar> Panel<T> {
    /// Q(:, top:m) := Q(:, top:m) (I − V T Vᵀ).
    /// The panels' reflectors H₁⋯H_p as one block reflector (docs/algorithms.md#blocked-reflectors):
    /// the panels' V stacked (each from its first row, zeros above) and T formed anew from
    /// the stacked V and the reflectors' τ (T's diagonal); a single panel as it is. None for
    /// no panel.
    fn merge(mut panels: Vec<Panel<T>>, m: usize) -> Option<Panel<T>> {
        if panels.len() <= 1 {
            return panels.pop();
        }
        let top = panels[0].top;
        let k = panels.iter().map(|p| p.v.ncols()).sum();
        let mut v = Mat::<T>::zeros(m - top, k);
        let mut taus = Vec::with_capacity(k);
        let mut c0 = 0;
        for panel in &panels {
            let off = panel.top - top;
            for j in 0..panel.v.ncols() {
                v.col_mut(c0 + j)[off..].copy_from_slice(panel.v.col(j));
                taus.push(panel.t[(j, j)]);
            }
            c0 += panel.v.ncols();
        }
        let t = larft(&v, &taus);
        Some(Panel { v, t, top })
    }

    fn apply_right(&self, q: &mut Mat<T>) {
        block_right(&self.v, &self.t, q, self.top);
    }
}
