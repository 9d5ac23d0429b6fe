//! Launchers of the apply kernels and the copies (gpu-kernels `two_phase/apply.rs`; the path
//! launcher also picks `two_phase_apply_pipe` (`apply_pipe.rs`) and `two_phase_apply_sweep`
//! (`sweep.rs`); docs/algorithms.md#two-phase-design).

use super::*;
#[allow(unused_imports)]
use crate::gpu::launch::launch_kernel;

impl Gpu {
    /// `two_phase_apply` (phase 2, docs/algorithms.md#two-phase-design): applies rotations
    /// 0..`list.len()` in order to up to three targets in one launch (e.g. Q from the right, R
    /// and d from the left), one thread per row (Cols) or column (Rows) of each target. A list
    /// made by [`Gpu::two_phase_gen_strip`] or [`Gpu::two_phase_gen_block`] goes through
    /// `two_phase_apply_pipe` ([`ApplyPath::Pipe`], ⌈p/8⌉ ≤ [`APPLY_PIPE_WARPS`] warps: each
    /// element read and written once per 64 chains, the same results bit for bit), a rank-one
    /// list through `two_phase_apply_sweep` ([`ApplyPath::Sweep`], unless a banded target meets
    /// its ascending part), any other list through `two_phase_apply` ([`ApplyPath::List`]).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If more than three targets are given or a target has fewer than `list.span()`
    /// elements per vector (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_apply<T: GpuScalar>(
        &self,
        list: &RotList<T>,
        targets: &mut [ApplyTarget<'_, '_, T>],
    ) -> Result<()> {
        let path = if let Some((sid, s0, s1)) = list.sched {
            // chains: p of a strip (s1) or block (s0) list; idle warps would only
            // hold registers and meet at the barriers
            let chains = if sid == 1 { s1 } else { s0 };
            let warps = chains.div_ceil(8).clamp(1, APPLY_PIPE_WARPS as usize) as u32;
            ApplyPath::Pipe { warps }
        } else if matches!(list.sweep, Some((_, up)) if up == 0 || targets.iter().all(|t| !t.banded))
        {
            ApplyPath::Sweep
        } else {
            ApplyPath::List
        };
        self.two_phase_apply_path(list, targets, path)
    }

    /// [`Gpu::two_phase_apply`] through the kernel `path` names (tests and benchmarks
    /// compare the paths; all give the same results bit for bit).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] if `path` is [`ApplyPath::Step`] or [`ApplyPath::Pipe`]
    /// and the list has no strip/block schedule (uploaded, or after
    /// [`RotList::forget_schedule`]), or `warps` is outside 1..=8, or `path` is
    /// [`ApplyPath::Sweep`] and the list is not a rank-one sweep or has an ascending part
    /// while a target is banded (nothing is launched);
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If more than three targets are given or a target has fewer than `list.span()`
    /// elements per vector (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_apply_path<T: GpuScalar>(
        &self,
        list: &RotList<T>,
        targets: &mut [ApplyTarget<'_, '_, T>],
        path: ApplyPath,
    ) -> Result<()> {
        assert!(targets.len() <= 3);
        let op = "two_phase_apply";
        if path == ApplyPath::Sweep {
            match list.sweep {
                None => {
                    return Err(Error::InvalidParam {
                        op,
                        what: "path",
                        why: "Sweep needs a rank-one list; this list has no sweep".into(),
                    })
                }
                Some((_, up)) if up > 0 && targets.iter().any(|t| t.banded) => {
                    return Err(Error::InvalidParam {
                        op,
                        what: "path",
                        why: "Sweep takes banded targets only without the ascending part".into(),
                    })
                }
                Some(_) => {}
            }
        } else if path != ApplyPath::List && list.sched.is_none() {
            return Err(Error::InvalidParam {
                op,
                what: "path",
                why: format!("{path:?} needs a strip or block list; this list has no schedule"),
            });
        }
        if let ApplyPath::Pipe { warps } = path {
            if !(1..=APPLY_PIPE_MAX_WARPS).contains(&warps) {
                return Err(Error::InvalidParam {
                    op,
                    what: "warps",
                    why: format!("{warps} warps per block; 1..={APPLY_PIPE_MAX_WARPS} allowed"),
                });
            }
        }
        let count = list.len;
        let mut meta = [(0usize, 0usize, 0usize, usize::MAX); 3];
        for (slot, t) in meta.iter_mut().zip(targets.iter()) {
            let (rs, cs, nvec, elems) = t.geometry();
            assert!(elems >= list.span, "target too small for the rotation list");
            assert!(!t.banded || t.side == RotSide::Rows);
            *slot = (rs, cs, nvec, if t.banded { 0 } else { usize::MAX });
        }
        let maxv = meta.iter().map(|m| m.2).max().unwrap_or(0);
        if count == 0 || maxv == 0 {
            return Ok(());
        }
        let null: u64 = 0;
        let ks = T::kernel_set(&self.kernels);
        let (sid, s0, s1) = list.sched.unwrap_or((0, 0, 0));
        let (f, launch) = match path {
            ApplyPath::List => (
                &ks.two_phase_apply,
                cfg(
                    (grid_blocks(maxv, APPLY_ROT_BLOCK), 3),
                    (APPLY_ROT_BLOCK, 1),
                ),
            ),
            ApplyPath::Step => (
                &ks.two_phase_apply_sched,
                cfg(
                    (grid_blocks(maxv, APPLY_ROT_BLOCK), 3),
                    (APPLY_ROT_BLOCK, 1),
                ),
            ),
            ApplyPath::Sweep => (
                &ks.two_phase_apply_sweep,
                cfg((grid_blocks(maxv, APPLY_BLOCK), 3), (APPLY_BLOCK, 1)),
            ),
            ApplyPath::Pipe { warps } => {
                let mut c = cfg((grid_blocks(maxv, 32), 3), (32 * warps, 1));
                c.shared_mem_bytes = (2 * 32 + PIPE_RING_ELEMS) * warps * size_of::<T>() as u32;
                (&ks.two_phase_apply_pipe, c)
            }
        };
        let mut b = self.kernel_args(f);
        let (down, up) = list.sweep.unwrap_or((0, 0));
        if path == ApplyPath::List {
            b.arg(&list.rot).arg(&list.plane).arg(&count);
        } else if path == ApplyPath::Sweep {
            b.arg(&list.rot).arg(&down).arg(&up);
        } else {
            b.arg(&list.rot).arg(&sid).arg(&s0).arg(&s1);
        }
        let mut it = targets.iter_mut();
        for slot in &meta {
            match it.next() {
                Some(t) => b.arg(t.view.buf_mut()),
                None => b.arg(&null),
            };
            b.arg(&slot.0).arg(&slot.1).arg(&slot.2).arg(&slot.3);
        }
        crate::gpu::ffi::driver::fault::launch().map_err(launch_err("two_phase_apply"))?;
        // SAFETY: matches two_phase_apply_{f32,f64}(rot: *const T, plane: *const u32,
        // count, then per target x: *mut T, rs, cs, n, b) for ApplyPath::List, or, for a
        // list with a schedule (checked above), two_phase_apply_sched_{f32,f64} /
        // two_phase_apply_pipe_{f32,f64}(rot: *const T, sched, s0, s1, the same targets),
        // whose list is the whole schedule's (set only by the generate launchers, which
        // recorded exactly count = len rotations); rot/plane hold ≥ count rotations;
        // every plane index + 1 < list.span ≤ the elements per vector of each target
        // (asserted), so vector t < n touches x[t·rs + k·cs] inside its view (row t,
        // column k for Cols; column t, row k for Rows); distinct vectors are distinct
        // rows/columns; targets are distinct &mut views (no overlap with each other or
        // the list); absent targets have n = 0 and a null pointer never read. Launch
        // shapes: List/Step grid (⌈max n/APPLY_ROT_BLOCK⌉, 3), block APPLY_ROT_BLOCK (the
        // kernels derive the vector index from blockDim, so any block size covers every
        // vector); Pipe grid (⌈max n/32⌉, 3), block 32·warps with 1 ≤ warps ≤ 8 (checked
        // above) and (2·32 + PIPE_RING_ELEMS)·warps·size_of::<T>() bytes of dynamic shared
        // memory (≤ 36 KiB at 8 warps of f64, under the 48 KiB default), as its
        // contract requires. Sweep: two_phase_apply_sweep_{f32,f64}(rot: *const T, down,
        // up, the same targets) on a list made by the rank-one generate launchers (down =
        // the stage A count, up = stage B's, down + up = count), banded targets only with
        // up = 0 (checked above); grid (⌈max n/APPLY_BLOCK⌉, 3), block APPLY_BLOCK (any
        // block size).
        unsafe { b.launch(launch) }.map_err(launch_err("two_phase_apply"))?;
        Ok(())
    }

    /// `two_phase_copy`: dst := src with the source rows `drop` removed (src has
    /// dst.nrows() + drop.len() rows, same columns); with `zero_lower`, entries below
    /// dst's diagonal are written as exact zeros.
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If the shapes do not match (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_copy<T: GpuScalar>(
        &self,
        src: &DevMatView<'_, T>,
        dst: &mut DevMatViewMut<'_, T>,
        drop: Range<usize>,
        zero_lower: bool,
    ) -> Result<()> {
        let (rows, cols) = (dst.nrows(), dst.ncols());
        assert!(drop.start <= drop.end && drop.end <= src.nrows());
        assert!(src.nrows() == rows + drop.len() && src.ncols() == cols);
        let (lds, ldd) = (src.ld(), dst.ld());
        self.copy_raw(
            src.buf(),
            lds,
            dst.buf_mut(),
            ldd,
            (rows, cols),
            drop,
            zero_lower,
        )
    }

    /// A new matrix holding `src` without its rows `drop` (as [`Gpu::two_phase_copy`],
    /// exact zeros below the diagonal with `zero_lower`): the row deletion's new Q, R
    /// and d. The copy writes every element, so the new matrix is not zeroed first, only
    /// its padding rows (the fill passes cost 0.7 ms at 12000×12000).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    ///
    /// # Panics
    /// If `drop` is not inside `src`'s rows (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_copy_new<T: GpuScalar>(
        &self,
        src: &DevMatView<'_, T>,
        drop: Range<usize>,
        zero_lower: bool,
    ) -> Result<DevMat<T>> {
        assert!(drop.start <= drop.end && drop.end <= src.nrows());
        let (rows, cols) = (src.nrows() - drop.len(), src.ncols());
        let mut out = DevMat::for_overwrite(self, rows, cols)?;
        self.two_phase_copy(src, &mut out.view_mut(), drop, zero_lower)?;
        Ok(out)
    }

    /// The diagonal a(j, j), j < min(rows, cols), into `out` (same launch as
    /// [`Gpu::two_phase_copy`] with source stride ld + 1).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `out` is shorter than the diagonal (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_diag<T: GpuScalar>(
        &self,
        a: &DevMatView<'_, T>,
        out: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        let k = a.nrows().min(a.ncols());
        assert!(out.len() >= k);
        let lds = a.ld() + 1;
        self.copy_raw(a.buf(), lds, out, 1, (1, k), 0..0, false)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn copy_raw<T: GpuScalar>(
        &self,
        src: &CudaView<'_, T>,
        lds: usize,
        dst: &mut CudaViewMut<'_, T>,
        ldd: usize,
        (rows, cols): (usize, usize),
        drop: Range<usize>,
        zero_lower: bool,
    ) -> Result<()> {
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        // Bounds: the last element read is (rows−1 + drop.len()) + (cols−1)·lds; the last
        // written (rows−1) + (cols−1)·ldd.
        assert!(rows - 1 + drop.len() + (cols - 1) * lds < src.len());
        assert!(rows <= ldd && rows - 1 + (cols - 1) * ldd < dst.len());
        assert!(cols.div_ceil(COPY_BLOCK.1 as usize) <= 65_535);
        let (skip0, skip_p, zl) = (drop.start, drop.len(), zero_lower as usize);
        let f = &T::kernel_set(&self.kernels).two_phase_copy;
        let config = cfg(
            (
                grid_blocks(rows, COPY_BLOCK.0),
                grid_blocks(cols, COPY_BLOCK.1),
            ),
            COPY_BLOCK,
        );
        // SAFETY: matches two_phase_copy_{f32,f64}(src: *const T, lds, rows, cols,
        // dst: *mut T, ldd, skip0, skip_p, zero_lower): every source index read is at
        // most rows−1+skip_p + (cols−1)·lds < src.len() and every destination index
        // written at most rows−1 + (cols−1)·ldd < dst.len() (asserted); dst is a &mut
        // view and src a shared one, so they do not overlap; grid (⌈rows/32⌉, ⌈cols/8⌉),
        // block (32, 8).
        unsafe {
            launch_kernel!(self, f, config, "two_phase_copy"; src, &lds, &rows, &cols,
                &mut *dst, &ldd, &skip0, &skip_p, &zl)
        }?;
        Ok(())
    }
}
