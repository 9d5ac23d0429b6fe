//! The seeds' Wavefront design for every Givens stage (docs/algorithms.md#givens-rotations,
//! docs/algorithms.md#restoring-the-strip, docs/algorithms.md#row-deletion,
//! docs/algorithms.md#rank-one-update; launch model in docs/algorithms.md#wavefront-schedule):
//! each wavefront step is one
//! `givens_make_wavefront` launch followed by `givens_apply_wavefront` launches, so a
//! stage costs O(steps) launches — the seed baseline the two-phase design is measured
//! against. Corrected as in docs/algorithms.md#safe-rotation-generation (safe rotations),
//! docs/algorithms.md#complete-rotation-application (complete apply),
//! docs/algorithms.md#transpose-tile-padding (padded
//! transpose), docs/algorithms.md#wavefront-schedule (exact t(·,·) step formulas instead of
//! `pnumadded` loops).

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream, CudaView};

use crate::base::error::Result;
use crate::base::wavefront::strip_step;
use crate::gpu::ffi::blas::Op;
use crate::gpu::runtime::matrix::DevMatViewMut;
use crate::gpu::runtime::{driver_err, DevMat, DevVec, Gpu, GpuScalar};

/// One wavefront step (docs/algorithms.md#givens-rotations): rotation i (i < count) zeroes pitched
/// entry (row0 + 2i, col0 + i) against (row0 + 2i − 1, col0 + i) of the driver block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Step {
    pub row0: usize,
    pub col0: usize,
    pub count: usize,
}

/// Strip schedule of column addition (docs/algorithms.md#wavefront-schedule,
/// docs/algorithms.md#column-insertion): local column j is
/// zeroed in rows h+j down to j+1; steps t = 0..h+p−1, column j at row h + 2j − t.
pub(crate) fn strip_steps(h: usize, p: usize) -> Vec<Step> {
    (0..(h + p).saturating_sub(1))
        .filter_map(|t| strip_step(h, p, t))
        .map(|(row0, col0, count)| Step { row0, col0, count })
        .collect()
}

/// Block schedule of row removal (docs/algorithms.md#wavefront-schedule,
/// docs/algorithms.md#row-deletion) with L = m: row i of Z
/// (pitched column z0 + i) is zeroed at planes (j−1, j), j = m−1 down to i+1, at step
/// t(i, j) = (m−1−j) + 2i; steps t = 0..m+p−2.
pub(crate) fn block_steps(m: usize, p: usize, z0: usize) -> Vec<Step> {
    (0..(m + p).saturating_sub(2))
        .filter_map(|t| {
            // Active i: j = m−1−t+2i ∈ [i+1, m−1]  ⇔  t+2−m ≤ i ≤ t/2.
            let i0 = (t + 2).saturating_sub(m);
            let i1 = (t / 2).min(p.checked_sub(1)?);
            (i0 <= i1).then(|| Step {
                row0: m + 2 * i0 - 1 - t,
                col0: z0 + i0,
                count: i1 - i0 + 1,
            })
        })
        .collect()
}

/// Which pitched columns a target's rotations cover.
#[derive(Clone, Copy, Debug)]
enum Span {
    /// Rotation i covers [col0 + i, end): the driver block from its active column on
    /// (docs/algorithms.md#live-column-range: not the padding, not the finished columns to the
    /// left).
    Active { end: usize },
    /// Every rotation covers [begin, end).
    All { begin: usize, end: usize },
}

/// A pitched operand receiving each step's rotations.
struct Target<'a, T> {
    a: DevMatViewMut<'a, T>,
    span: Span,
}

impl<T: GpuScalar> Target<'_, T> {
    fn apply(
        &mut self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        step: Step,
        c: &CudaView<'_, T>,
        s: &CudaView<'_, T>,
    ) -> Result<()> {
        let (cols, col_step) = match self.span {
            Span::Active { end } => (step.col0..end, 1),
            Span::All { begin, end } => (begin..end, 0),
        };
        gpu.givens_apply_wavefront_on(
            stream,
            &mut self.a,
            step.row0,
            step.count,
            cols,
            col_step,
            c,
            s,
        )
    }
}

fn new_event(gpu: &Gpu) -> Result<CudaEvent> {
    gpu.context()
        .new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
        .map_err(driver_err("creating an event"))
}

/// Runs `steps` (docs/algorithms.md#wavefront-schedule, without the seeds' host syncs): per step
/// one make on [`Gpu::stream`] reading `driver`, then the apply to `driver` on [`Gpu::stream`] and
/// one apply per `(target, stream)` of `others`, those concurrently on their streams
/// (docs/algorithms.md#wavefront-schedule). Events order make → applies → next make; (c, s) are
/// double-buffered so
/// the next make waits only for the applies that read its buffer two steps earlier.
/// On return all work is ordered before later work on [`Gpu::stream`].
fn run_wavefront<T: GpuScalar>(
    gpu: &Gpu,
    driver: &mut Target<'_, T>,
    others: &mut [(Target<'_, T>, &Arc<CudaStream>)],
    steps: &[Step],
) -> Result<()> {
    let cap = steps.iter().map(|s| s.count).max().unwrap_or(0);
    if cap == 0 {
        return Ok(());
    }
    let main = gpu.stream();
    let mut cs = [
        DevVec::<T>::zeros(gpu, 2 * cap)?,
        DevVec::<T>::zeros(gpu, 2 * cap)?,
    ];
    let fork = new_event(gpu)?;
    let mut done = Vec::with_capacity(others.len());
    for _ in 0..others.len() {
        done.push([new_event(gpu)?, new_event(gpu)?]);
    }
    let fork_all = |others: &[(Target<'_, T>, &Arc<CudaStream>)]| -> Result<()> {
        if !others.is_empty() {
            fork.record(main)
                .map_err(driver_err("recording an event"))?;
            for (_, st) in others {
                st.wait(&fork).map_err(driver_err("waiting on an event"))?;
            }
        }
        Ok(())
    };
    // The other streams start after everything already queued on the main stream.
    fork_all(others)?;
    let mut used = [false; 2];
    for (t, &step) in steps.iter().enumerate() {
        let b = t % 2;
        if used[b] {
            for ev in &done {
                main.wait(&ev[b])
                    .map_err(driver_err("waiting on an event"))?;
            }
        }
        {
            let mut buf = cs[b].view_mut();
            let (mut c, mut s) = buf.split_at_mut(cap);
            gpu.givens_make_wavefront_on(
                main,
                &driver.a.as_view(),
                step.row0,
                step.col0,
                step.count,
                &mut c,
                &mut s,
            )?;
        }
        fork_all(others)?;
        let buf = cs[b].view();
        let (c, s) = buf.split_at(cap);
        driver.apply(gpu, main, step, &c, &s)?;
        for ((target, st), ev) in others.iter_mut().zip(&done) {
            target.apply(gpu, st, step, &c, &s)?;
            ev[b].record(st).map_err(driver_err("recording an event"))?;
        }
        used[b] = true;
    }
    for (_, st) in others.iter() {
        main.join(st).map_err(driver_err("joining streams"))?;
    }
    Ok(())
}

/// Sets rows `rows` of column `j` of `a` to exact zeros on [`Gpu::stream`].
fn zero_col<T: GpuScalar>(
    gpu: &Gpu,
    a: &mut DevMat<T>,
    j: usize,
    rows: core::ops::Range<usize>,
) -> Result<()> {
    if rows.start < rows.end {
        gpu.count_launch();
        gpu.stream()
            .memset_zeros(&mut a.col_mut(j, rows))
            .map_err(driver_err("zeroing a column"))?;
    }
    Ok(())
}

/// dᵀ (q×m) as a new device matrix, or `None` when d has no columns.
fn transposed<T: GpuScalar>(gpu: &Gpu, d: &DevMat<T>) -> Result<Option<DevMat<T>>> {
    if d.ncols() == 0 {
        return Ok(None);
    }
    let mut dt = DevMat::zeros(gpu, d.ncols(), d.nrows())?;
    gpu.transpose_padded_on(gpu.stream(), &d.view(), &mut dt.view_mut())?;
    Ok(Some(dt))
}

/// Writes `src`ᵀ back into `dst` (shapes transposed) on [`Gpu::stream`].
fn transpose_back<T: GpuScalar>(gpu: &Gpu, src: &DevMat<T>, dst: &mut DevMat<T>) -> Result<()> {
    gpu.transpose_padded_on(gpu.stream(), &src.view(), &mut dst.view_mut())
}

/// Step 3 of column addition, seed design (docs/algorithms.md#column-insertion;
/// docs/algorithms.md#restoring-the-strip): the square R
/// region R[k0:n+p, k0:n+p] (n = `n_old`; new columns at k0..k0+p, already reduced below
/// row n by stage 1) is transposed into a pitched row-major buffer; each of the
/// (n−k0)+p−1 strip steps (docs/algorithms.md#givens-rotations) is one make and three concurrent
/// applies — the region on
/// [`Gpu::stream`], Q(:, k0:m) (its columns are pitched rows) on [`Gpu::stream2`], dᵀ on
/// [`Gpu::stream3`]; then the region is transposed back and the zeroed entries are set
/// to exact zeros. `r` is m×(n+p), `q` m×m, `d` m×q; nothing happens when k0 = n.
/// Launches: 4·steps + p + 4 (3·steps + p + 2 when d has no columns); all work is ordered
/// on [`Gpu::stream`].
///
/// # Errors
/// [`crate::Error::OutOfMemory`] for the pitched buffers, [`crate::Error::Driver`].
///
/// # Panics
/// If the shapes are inconsistent (a cuqr bug).
#[doc(hidden)]
pub fn insert_cols_strip_wavefront<T: GpuScalar>(
    gpu: &Gpu,
    r: &mut DevMat<T>,
    q: &mut DevMat<T>,
    d: &mut DevMat<T>,
    k0: usize,
    p: usize,
    n_old: usize,
) -> Result<()> {
    let m = r.nrows();
    let n = n_old + p;
    assert!(r.ncols() == n && n <= m && k0 <= n_old);
    assert!(q.nrows() == m && q.ncols() == m && d.nrows() == m);
    if k0 == n_old || p == 0 {
        return Ok(());
    }
    let (h, side, nrhs) = (n_old - k0, n - k0, d.ncols());
    let main = gpu.stream();
    let mut g = DevMat::<T>::zeros(gpu, side, side)?;
    gpu.transpose_padded_on(main, &r.block(k0, k0, side, side), &mut g.view_mut())?;
    let mut dt = transposed(gpu, d)?;
    let steps = strip_steps(h, p);
    {
        let mut driver = Target {
            a: g.view_mut(),
            span: Span::Active { end: side },
        };
        let mut others = vec![(
            Target {
                a: q.block_mut(0, k0, m, m - k0),
                span: Span::All { begin: 0, end: m },
            },
            gpu.stream2(),
        )];
        if let Some(dt) = dt.as_mut() {
            others.push((
                Target {
                    a: dt.block_mut(0, k0, nrhs, m - k0),
                    span: Span::All {
                        begin: 0,
                        end: nrhs,
                    },
                },
                gpu.stream3(),
            ));
        }
        run_wavefront(gpu, &mut driver, &mut others, &steps)?;
    }
    gpu.transpose_padded_on(main, &g.view(), &mut r.block_mut(k0, k0, side, side))?;
    if let Some(dt) = &dt {
        transpose_back(gpu, dt, d)?;
    }
    // The make kernel does not write its zeros; rows j+1.. of new column j are exact 0.
    for j in k0..k0 + p {
        zero_col(gpu, r, j, j + 1..m)?;
    }
    Ok(())
}

/// Packs the composite matrix C = [Q; Rᵀ; dᵀ]
/// (docs/algorithms.md#padded-transpose-and-composite-layout):
/// (m+n+q+extra)×m, each column of C contiguous with pitch rounded to 128 bytes; Q by a
/// 2-D copy, Rᵀ and dᵀ by `transpose_padded`. Rows beyond m+n+q are left zero.
fn pack_composite<T: GpuScalar>(
    gpu: &Gpu,
    q: &DevMat<T>,
    r: &DevMat<T>,
    d: &DevMat<T>,
    extra: usize,
) -> Result<DevMat<T>> {
    let (m, n, nrhs) = (q.nrows(), r.ncols(), d.ncols());
    let main = gpu.stream();
    let mut c = DevMat::<T>::zeros(gpu, m + n + nrhs + extra, m)?;
    gpu.copy_2d_on(main, &q.view(), &mut c.block_mut(0, 0, m, m))?;
    gpu.transpose_padded_on(main, &r.view(), &mut c.block_mut(m, 0, n, m))?;
    gpu.transpose_padded_on(main, &d.view(), &mut c.block_mut(m + n, 0, nrhs, m))?;
    Ok(c)
}

/// Unpacks Q, R and d from the composite matrix into the caller's buffers.
fn unpack_composite<T: GpuScalar>(
    gpu: &Gpu,
    c: &DevMat<T>,
    q: &mut DevMat<T>,
    r: &mut DevMat<T>,
    d: &mut DevMat<T>,
) -> Result<()> {
    let (m, n, nrhs) = (q.nrows(), r.ncols(), d.ncols());
    let main = gpu.stream();
    gpu.copy_2d_on(main, &c.block(0, 0, m, m), &mut q.view_mut())?;
    gpu.transpose_padded_on(main, &c.block(m, 0, n, m), &mut r.view_mut())?;
    gpu.transpose_padded_on(main, &c.block(m + n, 0, nrhs, m), &mut d.view_mut())
}

fn check_rows_shapes<T: GpuScalar>(
    q: &DevMat<T>,
    r: &DevMat<T>,
    d: &DevMat<T>,
    k0: usize,
    p: usize,
) {
    let m = q.nrows();
    assert!(q.ncols() == m && r.nrows() == m && d.nrows() == m && k0 + p <= m);
}

/// The rotations of row removal, seed composite design (docs/algorithms.md#row-deletion;
/// docs/algorithms.md#padded-transpose-and-composite-layout):
/// C = [Q; Rᵀ; dᵀ] is packed, the block wavefront (t(i, j) = (m−1−j) + 2i, m+p−2 steps)
/// runs with one make reading Z = rows k0..k0+p of C and ONE apply over all m+n+q
/// entries per step, and Q, R, d are unpacked in place: afterwards Q(k0..k0+p, :) ≈ [I 0],
/// R = GᵀR (its rows p.. are R̃, exactly upper trapezoidal) and d = Gᵀd; the caller
/// extracts Q̃, R̃, d̃. Launches: 2·(m+p−2) + 6.
///
/// # Errors
/// [`crate::Error::OutOfMemory`] for C, [`crate::Error::Driver`].
///
/// # Panics
/// If the shapes are inconsistent (a cuqr bug).
#[doc(hidden)]
pub fn delete_rows_rotate_composite<T: GpuScalar>(
    gpu: &Gpu,
    q: &mut DevMat<T>,
    r: &mut DevMat<T>,
    d: &mut DevMat<T>,
    k0: usize,
    p: usize,
) -> Result<()> {
    check_rows_shapes(q, r, d, k0, p);
    let m = q.nrows();
    let steps = block_steps(m, p, k0);
    if steps.is_empty() {
        return Ok(());
    }
    let mut c = pack_composite(gpu, q, r, d, 0)?;
    let rows = c.nrows();
    {
        let mut driver = Target {
            a: c.view_mut(),
            span: Span::All {
                begin: 0,
                end: rows,
            },
        };
        run_wavefront(gpu, &mut driver, &mut [], &steps)?;
    }
    unpack_composite(gpu, &c, q, r, d)
}

/// The same rotations as [`delete_rows_rotate_composite`], seed non-composite variant
/// (docs/algorithms.md#row-deletion, docs/algorithms.md#wavefront-schedule;
/// docs/algorithms.md#row-deletion): per step one make reading Z in Q, then three
/// concurrent applies — Q (its columns are pitched rows) on [`Gpu::stream`], a row-major
/// copy of R (Rᵀ) on [`Gpu::stream2`], dᵀ on [`Gpu::stream3`]. Same results in place.
/// Launches: 4·(m+p−2) + 4.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
///
/// # Panics
/// If the shapes are inconsistent (a cuqr bug).
#[doc(hidden)]
pub fn delete_rows_rotate_separate<T: GpuScalar>(
    gpu: &Gpu,
    q: &mut DevMat<T>,
    r: &mut DevMat<T>,
    d: &mut DevMat<T>,
    k0: usize,
    p: usize,
) -> Result<()> {
    check_rows_shapes(q, r, d, k0, p);
    let (m, n) = (q.nrows(), r.ncols());
    let steps = block_steps(m, p, k0);
    if steps.is_empty() {
        return Ok(());
    }
    let mut rt = transposed(gpu, r)?;
    let mut dt = transposed(gpu, d)?;
    {
        let mut driver = Target {
            a: q.view_mut(),
            span: Span::All { begin: 0, end: m },
        };
        let mut others = Vec::with_capacity(2);
        if let Some(rt) = rt.as_mut() {
            others.push((
                Target {
                    a: rt.view_mut(),
                    span: Span::All { begin: 0, end: n },
                },
                gpu.stream2(),
            ));
        }
        if let Some(dt) = dt.as_mut() {
            let nrhs = dt.nrows();
            others.push((
                Target {
                    a: dt.view_mut(),
                    span: Span::All {
                        begin: 0,
                        end: nrhs,
                    },
                },
                gpu.stream3(),
            ));
        }
        run_wavefront(gpu, &mut driver, &mut others, &steps)?;
    }
    if let Some(rt) = &rt {
        transpose_back(gpu, rt, r)?;
    }
    if let Some(dt) = &dt {
        transpose_back(gpu, dt, d)?;
    }
    Ok(())
}

/// The Givens stages of the rank-one update, seed-style (docs/algorithms.md#rank-one-update,
/// variant A1): given
/// w = Qᵀu (length m) and v (length n), packs C = [Q; Rᵀ; dᵀ; wᵀ] (the composite of
/// docs/algorithms.md#padded-transpose-and-composite-layout with w as one more row, so each
/// rotation is ONE make + ONE apply launch); stage A
/// zeroes w(i+1) against w(i) for i = m−2 down to 0 (R becomes upper Hessenberg),
/// R(0, :) += w₀vᵀ (one gemv on the composite), stage B zeroes H(i+1, i) against H(i, i)
/// for i < min(n, m−1); then Q, R, d are unpacked in place and R's strictly lower part is
/// set to exact zeros. `w` is not modified. Launches: 2(m−1) + 3·min(n, m−1) + 9.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`], [`crate::Error::Cublas`].
///
/// # Panics
/// If the shapes are inconsistent (a cuqr bug).
#[doc(hidden)]
pub fn rank_one_rotate_wavefront<T: GpuScalar>(
    gpu: &Gpu,
    w: &DevVec<T>,
    v: &DevVec<T>,
    r: &mut DevMat<T>,
    q: &mut DevMat<T>,
    d: &mut DevMat<T>,
) -> Result<()> {
    let (m, n, nrhs) = (q.nrows(), r.ncols(), d.ncols());
    assert!(q.ncols() == m && r.nrows() == m && d.nrows() == m);
    assert!(w.len() == m && v.len() == n);
    if m == 0 {
        return Ok(());
    }
    let main = gpu.stream();
    let wrow = m + n + nrhs;
    let mut c = pack_composite(gpu, q, r, d, 1)?;
    gpu.transpose_padded_on(main, &w.as_col(), &mut c.block_mut(wrow, 0, 1, m))?;
    // Stage A (A1): rotation on plane (i, i+1) is one step reading the w row of C.
    let stage_a: Vec<Step> = (0..m - 1)
        .rev()
        .map(|i| Step {
            row0: i + 1,
            col0: wrow,
            count: 1,
        })
        .collect();
    {
        let mut driver = Target {
            a: c.view_mut(),
            span: Span::All {
                begin: 0,
                end: wrow + 1,
            },
        };
        run_wavefront(gpu, &mut driver, &mut [], &stage_a)?;
    }
    // H = R + w₀e₀vᵀ: R(0, j) is C(m+j, 0), contiguous in C's column 0.
    if n > 0 {
        let mut w0 = DevVec::<T>::zeros(gpu, 1)?;
        gpu.count_launch();
        main.memcpy_dtod(&c.col(0, wrow..wrow + 1), &mut w0.view_mut())
            .map_err(driver_err("copying w₀"))?;
        gpu.gemv(
            Op::N,
            T::ONE,
            &v.as_col(),
            &w0.view(),
            T::ONE,
            &mut c.col_mut(0, m..m + n),
        )?;
    }
    // Stage B: zero H(i+1, i) (C(m+i, i+1)) against H(i, i) (C(m+i, i)).
    let stage_b: Vec<Step> = (0..n.min(m - 1))
        .map(|i| Step {
            row0: i + 1,
            col0: m + i,
            count: 1,
        })
        .collect();
    {
        let mut driver = Target {
            a: c.view_mut(),
            span: Span::All {
                begin: 0,
                end: wrow,
            },
        };
        run_wavefront(gpu, &mut driver, &mut [], &stage_b)?;
    }
    unpack_composite(gpu, &c, q, r, d)?;
    // Rotations over whole rows leave rounding residue left of the active column, and
    // the make kernel does not write its zeros: R's strictly lower part is set to 0.
    for j in 0..n {
        zero_col(gpu, r, j, (j + 1).min(m)..m)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (i, j) of the block case appears exactly once, at t = (m−1−j) + 2i, with
    /// concurrent rotations two planes apart (docs/algorithms.md#givens-rotations).
    #[test]
    fn block_steps_cover_each_rotation_once() {
        for (m, p, z0) in [(7usize, 3usize, 2usize), (5, 1, 0), (10, 4, 6), (4, 3, 1)] {
            let steps = block_steps(m, p, z0);
            // With p ≤ m−1 no step is empty, so the index is t.
            assert_eq!(steps.len(), m + p - 2);
            let mut seen = vec![vec![false; m]; p];
            for (t, s) in steps.iter().enumerate() {
                for k in 0..s.count {
                    let (i, j) = (s.col0 + k - z0, s.row0 + 2 * k);
                    assert!(i < p && j > i && j < m, "m={m} p={p} t={t} i={i} j={j}");
                    assert!(!seen[i][j]);
                    seen[i][j] = true;
                    assert_eq!((m - 1 - j) + 2 * i, t);
                }
            }
            for (i, row) in seen.iter().enumerate() {
                for (j, &hit) in row.iter().enumerate() {
                    assert_eq!(hit, j > i, "m={m} p={p} i={i} j={j}");
                }
            }
        }
    }

    /// The strip schedule covers column j at rows h+j down to j+1, each once, in
    /// bottom-up order within a column (docs/algorithms.md#wavefront-schedule).
    #[test]
    fn strip_steps_cover_each_rotation_once() {
        for (h, p) in [(5usize, 3usize), (1, 4), (9, 1), (6, 6)] {
            let steps = strip_steps(h, p);
            assert_eq!(steps.len(), h + p - 1);
            let mut last = vec![usize::MAX; p];
            let mut total = 0;
            for (t, s) in steps.iter().enumerate() {
                for k in 0..s.count {
                    let (j, r) = (s.col0 + k, s.row0 + 2 * k);
                    assert_eq!(r, h + 2 * j - t);
                    assert!(r > j && r <= h + j && r < last[j]);
                    last[j] = r;
                    total += 1;
                }
            }
            assert_eq!(total, h * p);
        }
    }
}
