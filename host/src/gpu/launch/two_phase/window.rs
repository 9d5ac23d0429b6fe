//! The windowed apply: every window of a chain list gathered and applied to its identity
//! block, then GEMMs (gpu-kernels `two_phase/window.rs`; docs/algorithms.md#windowed-application).

use super::*;
#[allow(unused_imports)]
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::launch::launch_kernel;

/// Window width of [`Gpu::two_phase_apply_windowed`] for `chains` chains: 2p
/// minimises the GEMMs' flops (8·m²·p against the rotations' 6·m²·p), and at least 512
/// keeps the launches few (docs/design.md, "windows of rotations applied by GEMM").
pub fn apply_window_width(chains: usize) -> usize {
    (2 * chains).max(512)
}

impl Gpu {
    /// [`Gpu::two_phase_apply`] of a strip or block list by windows of `w` planes and GEMM
    /// (docs/design.md, "windows of rotations applied by GEMM"). Window k = planes' columns
    /// [l_k, l_k + w), l_k = hi0 − h_w − k·h_w (h_w = w − p), takes chain c's planes
    /// l_k + 1 + c ..= l_k + h_w + c. The windows go from the top planes down, so together
    /// they take every rotation once, each window keeping the list's order within it. Two
    /// launches build every window's product at once: `two_phase_window_gather` copies the
    /// windows' rotations into a stack of strip lists (identity rotations outside the
    /// chains) and sets a stack of w×w identities, and `two_phase_window_pipe` makes
    /// Z_k = I·G_kᵀ for all k (blockIdx.y = k). Then, window by window, one GEMM a target
    /// applies Z_k through a scratch, copied back:
    /// * [`RotSide::Cols`]: X[:, W] ← X[:, W]·Z_W;
    /// * [`RotSide::Rows`]: X[W, c0..] ← Z_Wᵀ·X[W, c0..], with c0 = 0, or for a
    ///   `banded` target (upper triangular at its origin; the chains add at most p
    ///   sub-diagonals) the first column that can be nonzero, max(lo − p, 0).
    ///
    /// Zeros the rotations keep exactly (a structural zero of the sequential apply) stay
    /// exact: every product in the GEMM sum is then an exact 0. Launches: 2, then 2 a
    /// target a window; ⌈hi0/h_w⌉ windows. Device memory: windows·(w² + 2·p·h_w)
    /// elements. The result equals [`Gpu::two_phase_apply`]'s up to rounding.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] if the list is not a whole strip or block list, or
    /// `w ≤ p`, or a `Cols` target is `banded`, or the windows exceed the grid;
    /// [`Error::Shape`] if a target has fewer than `list.span()` elements a vector;
    /// [`Error::OutOfMemory`], [`Error::Driver`], [`Error::Cublas`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_apply_windowed<T: GpuScalar>(
        &self,
        list: &RotList<T>,
        targets: &mut [ApplyTarget<'_, '_, T>],
        w: usize,
    ) -> Result<()> {
        let Some(plan) = WindowPlan::new(list, targets, w)? else {
            return Ok(());
        };
        let z_len = plan.windows * w * w;
        let mut z = self
            .stream
            .alloc_zeroed::<T>(z_len)
            .map_err(alloc_err("window products", z_len * size_of::<T>()))?;
        let rot_len = 2 * plan.windows * plan.p * plan.hw;
        let mut rot = self
            .stream
            .alloc_zeroed::<T>(rot_len)
            .map_err(alloc_err("window rotations", rot_len * size_of::<T>()))?;
        let mut tc = DevMat::<T>::zeros(self, plan.max_rows, w)?;
        let mut tr = DevMat::<T>::zeros(self, w, plan.max_cols)?;
        self.window_products(list, &plan, &mut rot, &mut z)?;
        for k in 0..plan.windows {
            let l = plan.l0 - (k * plan.hw) as isize;
            let lo = l.max(0) as usize;
            let hi = ((l + w as isize) as usize).min(plan.span);
            // Z_k's local index of plane column lo (columns below 0 or from span on carry
            // no rotation: identity rows and columns of Z_k that the GEMMs leave out)
            let (off, width) = ((lo as isize - l) as usize, hi.saturating_sub(lo));
            if width == 0 {
                continue;
            }
            let zs = k * w * w + off * w + off;
            let zw = DevMatView::new(z.slice(zs..zs + (width - 1) * w + width), width, width, w)?;
            for t in targets.iter_mut() {
                match t.side {
                    RotSide::Cols => self.window_on_cols(t, &zw, lo, &mut tc)?,
                    RotSide::Rows => self.window_on_rows(t, &zw, lo, plan.p, &mut tr)?,
                }
            }
        }
        Ok(())
    }

    /// Every window's product Z_k = I·G_kᵀ at once: `two_phase_window_gather` copies the
    /// windows' rotations into `rot` (a stack of strip lists) and sets `z` to a stack of
    /// identities, then `two_phase_window_pipe` applies them.
    fn window_products<T: GpuScalar>(
        &self,
        list: &RotList<T>,
        plan: &WindowPlan,
        rot: &mut CudaSlice<T>,
        z: &mut CudaSlice<T>,
    ) -> Result<()> {
        let ks = T::kernel_set(&self.kernels);
        let (p, hw, hi0, inc, l0) = (plan.p, plan.hw, plan.hi0, plan.inc, plan.l0);
        let mut b = self.kernel_args(&ks.two_phase_window_gather);
        b.arg(&list.rot)
            .arg(&mut *rot)
            .arg(&mut *z)
            .arg(&p)
            .arg(&hw)
            .arg(&hi0)
            .arg(&inc)
            .arg(&l0);
        crate::gpu::ffi::driver::fault::launch().map_err(launch_err("two_phase_window_gather"))?;
        // SAFETY: matches two_phase_window_gather_{f32,f64}(src_rot: *const T, dst_rot:
        // *mut T, z: *mut T, p, hw, hi0, inc: usize, l0: isize), all typed above: the list
        // holds every chain's rotations (its sched says strip or block of p chains with
        // these hi0, inc); rot holds 2·p·hw·windows and z w²·windows elements (zeroed),
        // two allocations of their own; grid (gx, windows) with gx·256 ≥ p·hw ≥ 1 threads.
        unsafe { b.launch(cfg((plan.gx, plan.wy), (256, 1))) }
            .map_err(launch_err("two_phase_window_gather"))?;
        let warps = p.div_ceil(8).clamp(1, APPLY_PIPE_WARPS as usize) as u32;
        let mut c = cfg((plan.px, plan.wy), (32 * warps, 1));
        c.shared_mem_bytes = (2 * 32 + PIPE_RING_ELEMS) * warps * size_of::<T>() as u32;
        // SAFETY: matches two_phase_window_pipe_{f32,f64}(rot: *const T, hw, p: usize, z:
        // *mut T): rot holds windows whole strip lists of p chains of hw (the gather
        // above, in stream order), its base 256-byte aligned (cudarc allocation); z holds
        // windows blocks of w² elements; grid (⌈w/32⌉, windows), block 32·warps with
        // 1 ≤ warps ≤ APPLY_PIPE_WARPS = 8 and apply_pipe's dynamic shared memory
        // ((2·32 + PIPE_RING_ELEMS)·warps·size_of::<T>() ≤ 36 KiB, under the default).
        unsafe {
            launch_kernel!(self, &ks.two_phase_window_pipe, c, "two_phase_window_pipe"; &*rot,
                &hw, &p, &mut *z)
        }?;
        Ok(())
    }

    /// X[:, W] ← X[:, W]·Z_W for a [`RotSide::Cols`] target (W: `zw`'s columns from plane
    /// column `lo`), through the scratch `tc`.
    fn window_on_cols<T: GpuScalar>(
        &self,
        t: &mut ApplyTarget<'_, '_, T>,
        zw: &DevMatView<'_, T>,
        lo: usize,
        tc: &mut DevMat<T>,
    ) -> Result<()> {
        let (ld, width, rows) = (t.view.ld(), zw.ncols(), t.view.nrows());
        if rows == 0 {
            return Ok(());
        }
        let range = lo * ld..lo * ld + (width - 1) * ld + rows;
        let out = &mut tc.block_mut(0, 0, rows, width);
        {
            let a = t.view.buf().slice(range.clone());
            let a = DevMatView::new(a, rows, width, ld)?;
            self.gemm(Op::N, Op::N, T::ONE, &a, zw, T::ZERO, out)?;
        }
        let dst = t.view.buf_mut().slice_mut(range);
        let mut dst = DevMatViewMut::new(dst, rows, width, ld)?;
        self.panel_copy(&tc.block(0, 0, rows, width), &mut dst)
    }

    /// X[W, c0..] ← Z_Wᵀ·X[W, c0..] for a [`RotSide::Rows`] target (c0 = 0, or for a
    /// banded target max(lo − p, 0)), through the scratch `tr`.
    fn window_on_rows<T: GpuScalar>(
        &self,
        t: &mut ApplyTarget<'_, '_, T>,
        zw: &DevMatView<'_, T>,
        lo: usize,
        p: usize,
        tr: &mut DevMat<T>,
    ) -> Result<()> {
        let (ld, width, ncols) = (t.view.ld(), zw.ncols(), t.view.ncols());
        let c0 = if t.banded {
            lo.saturating_sub(p).min(ncols)
        } else {
            0
        };
        let cols = ncols - c0;
        if cols == 0 {
            return Ok(());
        }
        let start = c0 * ld + lo;
        let range = start..start + (cols - 1) * ld + width;
        let out = &mut tr.block_mut(0, 0, width, cols);
        {
            let a = t.view.buf().slice(range.clone());
            let a = DevMatView::new(a, width, cols, ld)?;
            self.gemm(Op::T, Op::N, T::ONE, zw, &a, T::ZERO, out)?;
        }
        let dst = t.view.buf_mut().slice_mut(range);
        let mut dst = DevMatViewMut::new(dst, width, cols, ld)?;
        self.panel_copy(&tr.block(0, 0, width, cols), &mut dst)
    }
}

/// The windows of one [`Gpu::two_phase_apply_windowed`]: the chains (p, hi0, inc), the
/// planes, the window height h_w = w − p and count, the launch grids and the scratch sizes.
struct WindowPlan {
    p: usize,
    hi0: usize,
    inc: usize,
    span: usize,
    hw: usize,
    windows: usize,
    /// First window's plane offset l_0 = hi0 − h_w.
    l0: isize,
    /// Grids: windows (y), the gather's entries and the pipe's rows (x).
    wy: u32,
    gx: u32,
    px: u32,
    /// Rows of the widest Cols target and columns of the widest Rows target.
    max_rows: usize,
    max_cols: usize,
}

impl WindowPlan {
    /// Checks the list and targets (see [`Gpu::two_phase_apply_windowed`]'s errors);
    /// `None` when there is nothing to apply.
    fn new<T: GpuScalar>(
        list: &RotList<T>,
        targets: &[ApplyTarget<'_, '_, T>],
        w: usize,
    ) -> Result<Option<Self>> {
        let Some((sid, s0, s1)) = list.sched else {
            return Err(Error::InvalidParam {
                op: WINDOWED_OP,
                what: "list",
                why: "not a whole strip or block list".into(),
            });
        };
        // (chains, hi0, inc): strip (1, h, p): hi_c = h + c; block (2, p, m): hi_c = m − 1.
        // Typed: all three are the kernel's 8-byte `usize` parameters (an untyped literal
        // would be an i32 and hand the kernel 4 bytes of garbage above it).
        let (p, hi0, inc): (usize, usize, usize) = if sid == 1 {
            (s1, s0, 1)
        } else {
            (s0, s1.saturating_sub(1), 0)
        };
        if w <= p {
            return Err(Error::InvalidParam {
                op: WINDOWED_OP,
                what: "w",
                why: format!("the window ({w}) must be wider than the chains ({p})"),
            });
        }
        let span = list.span;
        let (max_rows, max_cols) = target_extents(targets, span)?;
        if list.len == 0 || hi0 == 0 {
            return Ok(None);
        }
        let hw = w - p;
        // windows k = 0.. while window k holds a plane of some chain: l_k + h_w ≥ 1
        let windows = (hi0 - 1) / hw + 1;
        let grid_err = |what: &str| Error::InvalidParam {
            op: WINDOWED_OP,
            what: "w",
            why: format!("{windows} windows of {w} planes ({what}) exceed the grid"),
        };
        let wy = u32::try_from(windows)
            .ok()
            .filter(|&y| y <= 65_535)
            .ok_or_else(|| grid_err("windows"))?;
        let gx = u32::try_from((p * hw).div_ceil(256)).map_err(|_| grid_err("entries"))?;
        let px = u32::try_from(w.div_ceil(32)).map_err(|_| grid_err("rows"))?;
        Ok(Some(Self {
            p,
            hi0,
            inc,
            span,
            hw,
            windows,
            l0: hi0 as isize - hw as isize,
            wy,
            gx,
            px,
            max_rows,
            max_cols,
        }))
    }
}

const WINDOWED_OP: &str = "two_phase_apply_windowed";

/// Checks that every target has `span` elements a vector and that only Rows targets are
/// banded; returns the rows of the widest Cols target and the columns of the widest Rows
/// target.
fn target_extents<T>(targets: &[ApplyTarget<'_, '_, T>], span: usize) -> Result<(usize, usize)> {
    let (mut max_rows, mut max_cols) = (0, 0);
    for t in targets.iter() {
        let (planes, other) = match t.side {
            RotSide::Cols => (t.view.ncols(), t.view.nrows()),
            RotSide::Rows => (t.view.nrows(), t.view.ncols()),
        };
        if planes < span {
            return Err(Error::Shape {
                op: WINDOWED_OP,
                what: "elements a vector of a target",
                got: planes,
                expected: span,
            });
        }
        if t.side == RotSide::Cols && t.banded {
            return Err(Error::InvalidParam {
                op: WINDOWED_OP,
                what: "targets",
                why: "only a Rows target can be banded".into(),
            });
        }
        match t.side {
            RotSide::Cols => max_rows = max_rows.max(other),
            RotSide::Rows => max_cols = max_cols.max(other),
        }
    }
    Ok((max_rows, max_cols))
}

/// The window decomposition of [`Gpu::two_phase_apply_windowed`] checked on the CPU:
/// the same index arithmetic as `two_phase_window_gather` (mirrored here), the windows'
/// products made on identities and applied by matrix products, against the list applied
/// rotation by rotation in its own order.
#[cfg(test)]
mod window_tests {
    use crate::base::mat::Mat;
    use crate::cpu::givens::rot_pair;
    use crate::ops::insert_cols::testkit::rng;
    use rand::rngs::StdRng;
    use rand::Rng;

    /// Entry j of window chain c: (list index or None for the identity, local plane).
    /// Mirrors `two_phase::window_gather`.
    fn window_entry(
        c: usize,
        j: usize,
        hw: usize,
        hi0: usize,
        inc: usize,
        l: isize,
    ) -> (Option<usize>, usize) {
        let local = hw + c - j;
        let r = l + local as isize;
        let hi_c = hi0 + inc * c;
        let idx = (r >= (c + 1) as isize && r <= hi_c as isize).then(|| {
            let base = c * hi0 - (1 - inc) * (c * c.saturating_sub(1) / 2);
            base + (hi_c - r as usize)
        });
        (idx, local - 1)
    }

    /// A random chain list: chain c's rotations at planes hi_c − 1 down to c (index order
    /// of the step kernels), angles random.
    fn chain_list(p: usize, hi0: usize, inc: usize, g: &mut StdRng) -> Vec<(f64, f64, usize)> {
        let mut out = Vec::new();
        for c in 0..p {
            let hi_c = hi0 + inc * c;
            for r in (c + 1..=hi_c).rev() {
                let t = std::f64::consts::TAU * g.random::<f64>();
                out.push((t.cos(), t.sin(), r - 1));
            }
        }
        out
    }

    fn apply_cols(x: &mut Mat<f64>, list: &[(f64, f64, usize)]) {
        for &(c, s, a) in list {
            for i in 0..x.nrows() {
                let (mut u, mut v) = (x[(i, a)], x[(i, a + 1)]);
                rot_pair(c, s, &mut u, &mut v);
                x[(i, a)] = u;
                x[(i, a + 1)] = v;
            }
        }
    }

    /// Rows side: X := G·X (rotations on row pairs), as `two_phase_apply`'s Rows target.
    fn apply_rows(x: &mut Mat<f64>, list: &[(f64, f64, usize)]) {
        for &(c, s, a) in list {
            for j in 0..x.ncols() {
                let (mut u, mut v) = (x[(a, j)], x[(a + 1, j)]);
                rot_pair(c, s, &mut u, &mut v);
                x[(a, j)] = u;
                x[(a + 1, j)] = v;
            }
        }
    }

    /// The windows applied to `cols` (Cols side) and `rows` (Rows side, banded: columns
    /// from max(lo − p, 0) only), as `two_phase_apply_windowed` does.
    fn windowed(
        x: &mut Mat<f64>,
        rows_t: &mut Mat<f64>,
        list: &[(f64, f64, usize)],
        (p, hi0, inc, span): (usize, usize, usize, usize),
        w: usize,
    ) {
        let hw = w - p;
        let mut taken = vec![0usize; list.len()];
        let mut l = hi0 as isize - hw as isize;
        while l + hw as isize >= 1 {
            let mut wl = Vec::new();
            for c in 0..p {
                for j in 0..hw {
                    let (idx, plane) = window_entry(c, j, hw, hi0, inc, l);
                    let (cs, sn) = idx.map_or((1.0, 0.0), |k| (list[k].0, list[k].1));
                    if let Some(k) = idx {
                        assert_eq!(list[k].2 as isize, l + plane as isize, "plane of entry");
                        taken[k] += 1;
                    }
                    wl.push((cs, sn, plane));
                }
            }
            let mut z = Mat::from_fn(w, w, |i, j| if i == j { 1.0 } else { 0.0 });
            apply_cols(&mut z, &wl);
            let lo = l.max(0) as usize;
            let hi = ((l + w as isize) as usize).min(span);
            let off = (lo as isize - l) as usize;
            let width = hi - lo;
            let xs = Mat::from_fn(x.nrows(), width, |i, j| x[(i, lo + j)]);
            let zs = Mat::from_fn(width, width, |i, j| z[(off + i, off + j)]);
            let y = xs.matmul(&zs);
            for i in 0..x.nrows() {
                for j in 0..width {
                    x[(i, lo + j)] = y[(i, j)];
                }
            }
            let c0 = lo.saturating_sub(p).min(rows_t.ncols());
            let cols = rows_t.ncols() - c0;
            let xr = Mat::from_fn(width, cols, |i, j| rows_t[(lo + i, c0 + j)]);
            let yr = zs.transpose().matmul(&xr);
            for i in 0..width {
                for j in 0..cols {
                    rows_t[(lo + i, c0 + j)] = yr[(i, j)];
                }
            }
            l -= hw as isize;
        }
        assert!(
            taken.iter().all(|&t| t == 1),
            "every rotation in exactly one window"
        );
    }

    #[test]
    fn windows_give_the_list_product() {
        let mut g = rng(0x9e37_79b9);
        // (p, hi0, inc, span): strips (h + p columns) and blocks (m columns), windows
        // from barely wider than p to wider than the span
        let cases = [
            (3, 10, 1, 13, 5),
            (7, 40, 1, 47, 9),
            (7, 40, 1, 47, 60),
            (20, 13, 1, 33, 24),
            (1, 30, 1, 31, 2),
            (5, 29, 0, 30, 8),
            (12, 49, 0, 50, 13),
            (12, 49, 0, 50, 31),
            (12, 49, 0, 50, 100),
            (30, 79, 0, 80, 64),
            (1, 1, 0, 2, 2),
        ];
        for (p, hi0, inc, span, w) in cases {
            let list = chain_list(p, hi0, inc, &mut g);
            let x0 = Mat::from_fn(17, span, |_, _| g.random_range(-1.0..1.0));
            // an upper triangular Rows target (span rows, 23 columns), banded
            let r0 = Mat::from_fn(span, 23, |i, j| {
                if i <= j {
                    g.random_range(-1.0..1.0)
                } else {
                    0.0
                }
            });
            let mut direct = x0.clone();
            apply_cols(&mut direct, &list);
            let mut r_direct = r0.clone();
            apply_rows(&mut r_direct, &list);
            let mut win = x0.clone();
            let mut r_win = r0.clone();
            windowed(&mut win, &mut r_win, &list, (p, hi0, inc, span), w);
            let bound = 10.0 * (span + p) as f64 * f64::EPSILON;
            for (a, b, what) in [(&direct, &win, "cols"), (&r_direct, &r_win, "rows")] {
                for i in 0..a.nrows() {
                    for j in 0..a.ncols() {
                        let (u, v) = (a[(i, j)], b[(i, j)]);
                        assert!(
                            (u - v).abs() <= bound,
                            "{what} p={p} hi0={hi0} inc={inc} w={w} ({i}, {j}): {u:e} vs {v:e}"
                        );
                        if u == 0.0 {
                            // structural zeros stay exact (R's band)
                            assert_eq!(v, 0.0, "{what} ({i}, {j}) not exactly 0");
                        }
                    }
                }
            }
        }
    }
}
