//! Givens stages of the GPU updates in the two-phase design (docs/algorithms.md#two-phase-design;
//! docs/design.md "Givens stages"): one single-block generate
//! launch runs the wavefront over the driver block (the p new columns for
//! docs/algorithms.md#column-insertion, Z =
//! Q(k0..k0+p, :) for docs/algorithms.md#row-deletion, w and the Hessenberg R for
//! docs/algorithms.md#rank-one-update) and records the rotations
//! (pipelined kernels with one barrier a step, the strip or Z in shared memory
//! when it fits the opt-in limit, rank-one stage B with each column's running element in
//! a register); one apply launch streams them through Q, d and R together (for the strip
//! and block cases the blocked `two_phase_apply_pipe`, which reads and writes each
//! element of the targets once per 64 chains, once in all for p ≤ 64; for the rank-one
//! lists `two_phase_apply_sweep`, loads a batch ahead). Launches per stage: 2 for column
//! insertion and row deletion, 4–6 for the rank-one update, whatever the size (the
//! seeds' design needs O(steps)). Same rotations as the CPU backend (cpu/givens.rs).

#[cfg(doc)]
use crate::base::error::Error;
use crate::base::error::Result;
use crate::gpu::launch::two_phase::{apply_window_width, ApplyTarget, RotList};
use crate::gpu::runtime::matrix::{DevMat, DevVec};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// From this many chains a list that spans at least two windows is applied by windows
/// of rotations and GEMM ([`Gpu::two_phase_apply_windowed`], docs/design.md) instead of
/// by `two_phase_apply_pipe` (docs/performance.md, H100 f64: the Givens apply
/// alone 1.9–2.2× faster at 20 chains, 2.1–3.6× at 40–60 and 2.8–5.8× at 80–100 over
/// m = 2000–6000 planes; on one window, a short strip, the identity pass and the GEMMs
/// cost more than they save, so those stay on the pipe).
pub const WINDOWED_MIN_CHAINS: usize = 20;

/// Whether a column insertion's strip or a row deletion's block takes the windowed
/// Givens apply for `chains` chains whose highest plane index of chain 0 is `hi0` (a
/// strip's h, a block's m − 1).
pub fn takes_windowed_apply(chains: usize, hi0: usize) -> bool {
    chains >= WINDOWED_MIN_CHAINS && hi0 > apply_window_width(chains) - chains
}

/// Applies a strip or block list of `chains` chains (chain 0's top plane index `hi0`) to
/// Q (columns), R (rows, banded) and d (rows): one `two_phase_apply` launch, or by
/// windows and GEMM where [`takes_windowed_apply`].
fn apply_q_r_d<'a, T: GpuScalar>(
    gpu: &Gpu,
    list: &RotList<T>,
    (chains, hi0): (usize, usize),
    qv: &mut crate::gpu::runtime::DevMatViewMut<'a, T>,
    rv: &mut crate::gpu::runtime::DevMatViewMut<'a, T>,
    dv: &mut crate::gpu::runtime::DevMatViewMut<'a, T>,
) -> Result<()> {
    let mut targets = ApplyTarget::q_r_d(qv, rv, dv);
    if takes_windowed_apply(chains, hi0) {
        gpu.two_phase_apply_windowed(list, &mut targets, apply_window_width(chains))
    } else {
        gpu.two_phase_apply(list, &mut targets)
    }
}

/// Step 3 of docs/algorithms.md#column-insertion on the device: R is m×(n_old+p) after stage 1 with
/// the new columns at k0..k0+p (column k0+j nonzero in rows ≤ n_old+j), Q has m columns (m×m,
/// or the thin [Q₁ Q_z] of docs/algorithms.md#thin-column-insertion), d is m×q.
/// Zeroes the strip with p·(n_old − k0) rotations, exactly as `insert_cols::run_cpu`
/// step 3, rotating R's later columns, Q's columns k0..n_old+p and d's rows k0..n_old+p.
/// Nothing to do when k0 = n_old (appending, docs/algorithms.md#column-insertion-schedule).
///
/// # Errors
/// [`Error::OutOfMemory`] for the rotation list, [`Error::Driver`].
///
/// # Panics
/// If the shapes are inconsistent (a cuqr bug).
pub fn insert_cols_strip_two_phase<T: GpuScalar>(
    gpu: &Gpu,
    r: &mut DevMat<T>,
    q: &mut DevMat<T>,
    d: &mut DevMat<T>,
    k0: usize,
    p: usize,
    n_old: usize,
) -> Result<()> {
    let (m, mq) = (r.nrows(), q.nrows());
    assert!(k0 <= n_old && r.ncols() == n_old + p && n_old + p <= m);
    assert!(q.ncols() == m && d.nrows() == m);
    let h = n_old - k0;
    if h == 0 || p == 0 {
        return Ok(());
    }
    let mut list = RotList::with_capacity(gpu, p * h)?;
    gpu.two_phase_gen_strip(&mut r.block_mut(k0, k0, h + p, p), h, &mut list)?;
    gpu.stage_mark("givens generate");
    let nq = d.ncols();
    let mut qv = q.block_mut(0, k0, mq, h + p);
    let mut dv = d.block_mut(k0, 0, h + p, nq);
    let mut rv = r.block_mut(k0, k0 + p, h + p, h);
    apply_q_r_d(gpu, &list, (p, h), &mut qv, &mut rv, &mut dv)?;
    gpu.stage_mark("givens apply");
    Ok(())
}

/// The rotations of docs/algorithms.md#row-deletion on the device, in place (Q has as many
/// columns as R and d have rows: m×m, or the thin [Q₁ V] of
/// docs/algorithms.md#thin-row-deletion): afterwards Q(k0..k0+p, :) = [Δ, 0] with Δ ≈ I, R := GᵀR (upper trapezoidal with p sub-diagonals' residue in the
/// first p rows only) and d := Gᵀd, exactly as `delete_rows::rotate_out`. The caller
/// drops the first p rows/columns.
///
/// # Errors
/// [`Error::OutOfMemory`] for the scratch and rotation list, [`Error::Driver`].
///
/// # Panics
/// If the shapes are inconsistent or p ≥ m (a cuqr bug).
pub fn delete_rows_rotate_two_phase<T: GpuScalar>(
    gpu: &Gpu,
    q: &mut DevMat<T>,
    r: &mut DevMat<T>,
    d: &mut DevMat<T>,
    k0: usize,
    p: usize,
) -> Result<()> {
    let m = q.ncols();
    assert!(r.nrows() == m && d.nrows() == m);
    assert!(p < m && k0 + p <= q.nrows());
    if p == 0 {
        return Ok(());
    }
    let mut z = DevVec::zeros(gpu, p * m)?;
    let mut list = RotList::with_capacity(gpu, p * m - p * (p + 1) / 2)?;
    gpu.two_phase_gen_block(&q.block(k0, 0, p, m), &mut z, &mut list)?;
    gpu.stage_mark("givens generate");
    let mut qv = q.view_mut();
    let mut rv = r.view_mut();
    let mut dv = d.view_mut();
    apply_q_r_d(gpu, &list, (p, m - 1), &mut qv, &mut rv, &mut dv)?;
    gpu.stage_mark("givens apply");
    Ok(())
}

/// Stages A and B of docs/algorithms.md#rank-one-update on the device, given w = Qᵀu (length m,
/// overwritten) and v (length n); Q has m columns (m×m, or the thin [Q₁ q̂] of
/// docs/algorithms.md#thin-rank-one-update): when m > n + 1 (variant A2, as the CPU backend) one Householder
/// reflector on w(n:m) applied to Q(:, n:m) and d(n:m), then rotations zeroing w below
/// row 0 (applied to R, making it upper Hessenberg); R(0, :) += w(0)·vᵀ; stage B restores
/// triangularity (exact zeros below the diagonal); all rotations are then applied to Q
/// and d in one launch.
///
/// # Errors
/// [`Error::OutOfMemory`], [`Error::Driver`].
///
/// # Panics
/// If the shapes are inconsistent (a cuqr bug).
pub fn rank_one_rotate_two_phase<T: GpuScalar>(
    gpu: &Gpu,
    w: &mut DevVec<T>,
    v: &DevVec<T>,
    r: &mut DevMat<T>,
    q: &mut DevMat<T>,
    d: &mut DevMat<T>,
) -> Result<()> {
    let (m, n, mq) = (r.nrows(), r.ncols(), q.nrows());
    assert!(w.len() == m && v.len() == n && q.ncols() == m);
    assert!(d.nrows() == m);
    if m == 0 {
        return Ok(());
    }
    let nq = d.ncols();
    let top = if m > n + 1 {
        let mut tau = DevVec::zeros(gpu, 1)?;
        {
            let mut wv = w.slice_mut(n..m);
            let (mut alpha, mut tail) = wv.split_at_mut(1);
            gpu.householder_house(&mut alpha, &mut tail, &mut tau.view_mut())?;
        }
        let mut qv = q.block_mut(0, n, mq, m - n);
        let mut dv = d.block_mut(n, 0, m - n, nq);
        gpu.two_phase_house_apply(
            &w.slice(n + 1..m),
            &tau.view(),
            &mut ApplyTarget::q_d(&mut qv, &mut dv),
        )?;
        gpu.stage_mark("stage A householder");
        n
    } else {
        m - 1
    };
    let mut list = RotList::with_capacity(gpu, top + n.min(m - 1))?;
    gpu.two_phase_gen_rank_one_a(&mut w.slice_mut(0..top + 1), &mut list)?;
    gpu.stage_mark("stage A generate");
    {
        let mut rv = r.view_mut();
        gpu.two_phase_apply(&list, &mut [ApplyTarget::rows(&mut rv, true)])?;
    }
    gpu.stage_mark("stage A apply to R");
    gpu.two_phase_gen_rank_one_b(&mut r.view_mut(), &w.slice(0..1), &v.view(), &mut list)?;
    gpu.stage_mark("stage B generate");
    let mut qv = q.view_mut();
    let mut dv = d.view_mut();
    gpu.two_phase_apply(&list, &mut ApplyTarget::q_d(&mut qv, &mut dv))?;
    gpu.stage_mark("apply A+B to Q, d");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The windowed path needs 20 chains and a span of at least two windows.
    #[test]
    fn windowed_apply_choice() {
        // w = 512 for up to 256 chains (h_w = 512 − p), 2p beyond (h_w = p)
        assert!(!takes_windowed_apply(19, 100_000));
        assert!(!takes_windowed_apply(20, 492));
        assert!(takes_windowed_apply(20, 493));
        assert!(!takes_windowed_apply(65, 447));
        assert!(takes_windowed_apply(65, 448));
        assert!(!takes_windowed_apply(100, 20));
        assert!(takes_windowed_apply(200, 3000));
        assert!(!takes_windowed_apply(900, 900));
        assert!(takes_windowed_apply(900, 901));
    }
}
