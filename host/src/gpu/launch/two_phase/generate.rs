//! Launchers of the generate kernels: strip, block and rank-one, each choosing its path among
//! the step kernels (gpu-kernels `two_phase/generate.rs`), the pipelined ones (`pipe.rs`, shape
//! in [`super::pipe`]) and the chains (`chains.rs`, launched by [`super::chains`])
//! (docs/algorithms.md#two-phase-design).

use super::*;
#[allow(unused_imports)]
use crate::gpu::launch::launch_kernel;

impl Gpu {
    /// The device's opt-in dynamic shared memory per block (bytes): the pipelined
    /// strip/block generate keeps its driver block in shared memory when 4·p + the
    /// driver's elements fit (tests pick sizes at this boundary).
    ///
    /// # Errors
    /// [`Error::Driver`] if the attribute query fails.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_smem_optin(&self) -> Result<usize> {
        self.smem_optin()
    }

    /// The default path of a strip (driver (h+p)×p) or block (p×m) generate with
    /// `chains` = p: the driver in shared memory when it fits, else the pipelined kernel
    /// in global memory, else (rotation buffers too large) the step kernel.
    pub(super) fn gen_default_path<T: GpuScalar>(
        &self,
        chains: usize,
        driver: usize,
        len: usize,
    ) -> Result<GenPath> {
        if self.two_phase_chains_fit::<T>(chains, len)? {
            return Ok(GenPath::Chains);
        }
        if chains > GEN_PIPE_MAX_CHAINS {
            return Ok(GenPath::Step);
        }
        let (optin, elem) = (self.two_phase_smem_optin()?, size_of::<T>());
        Ok(if gen_pipe_bytes(chains, driver, true, elem) <= optin {
            GenPath::Pipe { shared: true }
        } else if gen_pipe_bytes(chains, driver, false, elem) <= optin {
            GenPath::Pipe { shared: false }
        } else {
            GenPath::Step
        })
    }

    /// `two_phase_gen_strip` (docs/algorithms.md#wavefront-schedule,
    /// docs/algorithms.md#restoring-the-strip): runs the wavefront on the driver block `x` =
    /// R'(k0..n+p, k0..k0+p) ((h+p)×p, h = n − k0) in place — ρ on the band, exact zeros below
    /// it, rows rotated in the driver's later columns — and records the p·h rotations into
    /// `list` (replacing it) in the sequential order of `update::insert_cols::run_cpu`, planes
    /// local to row k0. Runs the chains of warp scans ([`GenPath::Chains`]) when a vector fits
    /// a block, else the pipelined wavefront with the driver in shared memory when it fits,
    /// else in global memory ([`GenPath`]).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] (the chains' flags), [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `x` is not (h+p)×p or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_strip<T: GpuScalar>(
        &self,
        x: &mut DevMatViewMut<'_, T>,
        h: usize,
        list: &mut RotList<T>,
    ) -> Result<()> {
        let p = x.ncols();
        let path = self.gen_default_path::<T>(p, (h + p) * p, h + p)?;
        self.two_phase_gen_strip_path(x, h, list, path)
    }

    /// [`Gpu::two_phase_gen_strip`] through the kernel `path` names (tests and
    /// benchmarks; every path gives the same list and driver bit for bit).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] if `path` is `Pipe` and its shared memory exceeds the
    /// device's limit, or `Chains` and a vector does not fit a block (nothing is
    /// launched, `list` and `x` are unchanged);
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `x` is not (h+p)×p or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_strip_path<T: GpuScalar>(
        &self,
        x: &mut DevMatViewMut<'_, T>,
        h: usize,
        list: &mut RotList<T>,
        path: GenPath,
    ) -> Result<()> {
        let p = x.ncols();
        assert_eq!(x.nrows(), h + p);
        list.reserve_from_empty(p * h);
        if p == 0 || h == 0 {
            list.clear();
            return Ok(());
        }
        let ld = x.ld();
        if path == GenPath::Chains {
            let (px, _gx) = x.buf_mut().device_ptr_mut(&self.stream);
            let io = ChainIo {
                src: px,
                src_vs: ld,
                src_es: 1,
                dst: px,
                dst_vs: ld,
                dst_es: 1,
            };
            // SAFETY: the driver is (h+p)×p with ld ≥ h+p (asserted shape, view extent),
            // so vector j (column j, elements 0..=h+j) lies inside it for src and dst;
            // the view is borrowed mutably, so nothing else touches it; the list holds
            // ≥ p·h rotations (reserve), the chains' total.
            unsafe { self.gen_chains_launch::<T>(io, p, h, 1, h + p, list) }?;
            list.len = p * h;
            list.span = h + p;
            list.sched = Some((1, h, p));
            return Ok(());
        }
        let ks = T::kernel_set(&self.kernels);
        let (f, launch, in_smem) = match path {
            GenPath::Chains => unreachable!("handled above"),
            GenPath::Step => (&ks.two_phase_gen_strip, cfg((1, 1), (GEN_BLOCK, 1)), 0usize),
            GenPath::Pipe { shared } => {
                let f = &ks.two_phase_gen_strip_pipe;
                let c = self.gen_pipe_cfg::<T>(f, "two_phase_gen_strip", p, (h + p) * p, shared)?;
                (f, c, shared as usize)
            }
        };
        list.clear();
        let mut b = self.kernel_args(f);
        b.arg(x.buf_mut())
            .arg(&ld)
            .arg(&h)
            .arg(&p)
            .arg(&mut list.rot)
            .arg(&mut list.plane);
        if path != GenPath::Step {
            b.arg(&in_smem);
        }
        crate::gpu::ffi::driver::fault::launch().map_err(launch_err("two_phase_gen_strip"))?;
        // SAFETY: matches two_phase_gen_strip_{f32,f64}(x: *mut T, ld, h, p, rot: *mut T,
        // plane: *mut u32) for GenPath::Step, or two_phase_gen_strip_pipe_{f32,f64}(the
        // same, in_smem) for Pipe: x spans (h+p)×p with ld ≥ h+p (asserted shape, view
        // extent); rot holds 2·cap ≥ 2·p·h and plane cap ≥ p·h (reserve); three distinct
        // &mut buffers cannot overlap; grid 1, block GEN_BLOCK (the pipe: any multiple of
        // 32 up to it, gen_pipe_cfg); the pipe's dynamic shared memory is (4p + in_smem·(h+p)·p)·size_of::<T>() (gen_pipe_cfg, within
        // the limit it raised) and p ≤ GEN_PIPE_MAX_CHAINS < 2³².
        unsafe { b.launch(launch) }.map_err(launch_err("two_phase_gen_strip"))?;
        list.len = p * h;
        list.span = h + p;
        list.sched = Some((1, h, p));
        Ok(())
    }

    /// `two_phase_gen_block` (docs/algorithms.md#wavefront-schedule,
    /// docs/algorithms.md#row-deletion): copies Z = `qz` (p×m, rows k0..k0+p of Q) into the
    /// compact scratch `z` (p·m) and runs the wavefront on it, recording the pm − p(p+1)/2
    /// rotations into `list` (replacing it) in the order of `update::delete_rows::rotate_out`;
    /// planes are column indices of Q. Runs the chains of warp scans ([`GenPath::Chains`]) when
    /// a vector fits a block, else the pipelined wavefront with Z in shared memory when it
    /// fits, else in `z` ([`GenPath`]); `z` holds the final Z either way.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] (the chains' flags), [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If p ≥ m, `z` is shorter than p·m or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_block<T: GpuScalar>(
        &self,
        qz: &DevMatView<'_, T>,
        z: &mut DevVec<T>,
        list: &mut RotList<T>,
    ) -> Result<()> {
        let (p, m) = (qz.nrows(), qz.ncols());
        let path = self.gen_default_path::<T>(p, p * m, m)?;
        self.two_phase_gen_block_path(qz, z, list, path)
    }

    /// [`Gpu::two_phase_gen_block`] through the kernel `path` names (tests and
    /// benchmarks; every path gives the same list and final Z bit for bit).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] if `path` is `Pipe` and its shared memory exceeds the
    /// device's limit, or `Chains` and a vector does not fit a block (nothing is
    /// launched; `list` and `z` are unchanged);
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If p ≥ m, `z` is shorter than p·m or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_block_path<T: GpuScalar>(
        &self,
        qz: &DevMatView<'_, T>,
        z: &mut DevVec<T>,
        list: &mut RotList<T>,
        path: GenPath,
    ) -> Result<()> {
        let (p, m) = (qz.nrows(), qz.ncols());
        assert!(p < m && z.len() >= p * m);
        let count = p * m - p * (p + 1) / 2;
        list.reserve_from_empty(count);
        if p == 0 {
            list.clear();
            return Ok(());
        }
        let ldq = qz.ld();
        if path == GenPath::Chains {
            let (pq, _gq) = qz.buf().device_ptr(&self.stream);
            let mut zv = z.view_mut();
            let (pz, _gz) = zv.device_ptr_mut(&self.stream);
            let io = ChainIo {
                src: pq,
                src_vs: 1,
                src_es: ldq,
                dst: pz,
                dst_vs: 1,
                dst_es: p,
            };
            // SAFETY: vector i is row i of the p×m view qz (elements 0..m at i + j·ldq,
            // inside the view) and of the compact z (i + j·p < p·m ≤ z.len(), asserted);
            // qz is borrowed shared and z mutably, so they do not overlap and nothing
            // else writes them; hi_i = m − 1 ≥ i + 1 as p < m; the list holds ≥ count
            // rotations (reserve), the chains' total.
            unsafe { self.gen_chains_launch::<T>(io, p, m - 1, 0, m, list) }?;
            list.len = count;
            list.span = m;
            list.sched = Some((2, p, m));
            return Ok(());
        }
        let ks = T::kernel_set(&self.kernels);
        let (f, launch, in_smem) = match path {
            GenPath::Chains => unreachable!("handled above"),
            GenPath::Step => (&ks.two_phase_gen_block, cfg((1, 1), (GEN_BLOCK, 1)), 0usize),
            GenPath::Pipe { shared } => {
                let f = &ks.two_phase_gen_block_pipe;
                let c = self.gen_pipe_cfg::<T>(f, "two_phase_gen_block", p, p * m, shared)?;
                (f, c, shared as usize)
            }
        };
        list.clear();
        let mut zv = z.view_mut();
        let mut b = self.kernel_args(f);
        b.arg(qz.buf())
            .arg(&ldq)
            .arg(&p)
            .arg(&m)
            .arg(&mut zv)
            .arg(&mut list.rot)
            .arg(&mut list.plane);
        if path != GenPath::Step {
            b.arg(&in_smem);
        }
        crate::gpu::ffi::driver::fault::launch().map_err(launch_err("two_phase_gen_block"))?;
        // SAFETY: matches two_phase_gen_block_{f32,f64}(qz: *const T, ldq, p, m,
        // z: *mut T, rot: *mut T, plane: *mut u32) for GenPath::Step, or
        // two_phase_gen_block_pipe_{f32,f64}(the same, in_smem) for Pipe: qz is a p×m
        // view (ld ldq), z holds ≥ p·m (asserted), rot/plane hold ≥ count rotations
        // (reserve); z, rot, plane are distinct &mut buffers and qz is borrowed shared,
        // so none overlap; p < m; grid 1, block GEN_BLOCK (the pipe: any multiple of 32
        // up to it, gen_pipe_cfg); the pipe's dynamic shared memory is (4p + in_smem·p·m)·size_of::<T>() (gen_pipe_cfg, within the limit it
        // raised) and p ≤ GEN_PIPE_MAX_CHAINS < 2³².
        unsafe { b.launch(launch) }.map_err(launch_err("two_phase_gen_block"))?;
        list.len = count;
        list.span = m;
        list.sched = Some((2, p, m));
        Ok(())
    }

    /// `two_phase_gen_rank_one_a` (docs/algorithms.md#rank-one-update): on w(0..=top) (`w.len()` =
    /// top + 1), rotations zeroing w(i+1) against w(i) for i = top−1 down to 0, recorded
    /// into `list` (replacing it); w(0) := ρ, the rest exact zeros. All rotations are made
    /// at once from scaled suffix norms of w (one block, a scan; the serial chain's
    /// rotations up to rounding).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `w` is empty or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_rank_one_a<T: GpuScalar>(
        &self,
        w: &mut CudaViewMut<'_, T>,
        list: &mut RotList<T>,
    ) -> Result<()> {
        assert!(!w.is_empty());
        let top = w.len() - 1;
        list.clear();
        list.reserve(top);
        list.sweep = Some((top, 0));
        if top == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).two_phase_gen_rank_one_a;
        let mut c = cfg((1, 1), (GEN_A_BLOCK, 1));
        c.shared_mem_bytes = 64 * size_of::<T>() as u32;
        // SAFETY: matches two_phase_gen_rank_one_a_{f32,f64}(w: *mut T, top, rot: *mut T,
        // plane: *mut u32): w holds top+1, rot/plane ≥ top rotations (reserve); distinct
        // &mut buffers; grid 1, a block of GEN_A_BLOCK (a multiple of 32, ≤ 1024)
        // threads and 64 elements of dynamic shared memory, as the kernel requires.
        unsafe {
            launch_kernel!(self, f, c, "two_phase_gen_rank_one_a"; &mut *w, &top,
                &mut list.rot, &mut list.plane)
        }?;
        list.len = top;
        list.span = top + 1;
        Ok(())
    }

    /// `two_phase_gen_rank_one_b` (docs/algorithms.md#rank-one-update): R(0, :) += w(0)·vᵀ,
    /// then stage B on the upper Hessenberg `r` (m×n), done in place; its min(n, m−1) rotations
    /// are appended to `list` (planes (i, i+1)). Runs the pipelined kernel (one barrier a step)
    /// when n ≤ [`GEN_R1_MAX_N`], else the step kernel ([`GenPath`]).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `w` is empty, `v.len() != n` or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_rank_one_b<T: GpuScalar>(
        &self,
        r: &mut DevMatViewMut<'_, T>,
        w: &CudaView<'_, T>,
        v: &CudaView<'_, T>,
        list: &mut RotList<T>,
    ) -> Result<()> {
        let path = if r1_pipe_fits(r.ncols(), r.ld()) {
            GenPath::Pipe { shared: false }
        } else {
            GenPath::Step
        };
        self.two_phase_gen_rank_one_b_path(r, w, v, list, path)
    }

    /// [`Gpu::two_phase_gen_rank_one_b`] through the kernel `path` names (tests and
    /// benchmarks; both give the same rotations and R bit for bit).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] for `Pipe { shared: true }`, or `Pipe` with n >
    /// [`GEN_R1_MAX_N`] or ld·n ≥ 2³² (nothing is launched; `r` and `list` unchanged);
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `w` is empty, `v.len() != n` or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_rank_one_b_path<T: GpuScalar>(
        &self,
        r: &mut DevMatViewMut<'_, T>,
        w: &CudaView<'_, T>,
        v: &CudaView<'_, T>,
        list: &mut RotList<T>,
        path: GenPath,
    ) -> Result<()> {
        let (m, n) = (r.nrows(), r.ncols());
        assert!(!w.is_empty() && v.len() == n);
        let nb = n.min(m.saturating_sub(1));
        list.reserve(nb);
        if path != GenPath::Step
            && (path == (GenPath::Pipe { shared: true }) || !r1_pipe_fits(n, r.ld()))
        {
            return Err(Error::InvalidParam {
                op: "two_phase_gen_rank_one_b",
                what: "path",
                why: format!(
                    "{path:?}: the pipelined stage B keeps R in global memory and takes n ≤ \
                     {GEN_R1_MAX_N} with ld·n < 2^32 (n = {n}, ld = {})",
                    r.ld()
                ),
            });
        }
        list.sched = None;
        list.sweep = match list.sweep {
            Some((down, 0)) if down == list.len => Some((down, nb)),
            _ => None,
        };
        if n == 0 || m == 0 {
            return Ok(());
        }
        let (ldr, k_off) = (r.ld(), list.len);
        let ks = T::kernel_set(&self.kernels);
        let (f, launch) = if path == GenPath::Step {
            (&ks.two_phase_gen_rank_one_b, cfg((1, 1), (GEN_BLOCK, 1)))
        } else {
            // Two columns a thread when a block of the two-column kernel covers n (a
            // fifth of the twelve-column kernel's code, which stalled on instruction
            // fetch), with as many threads as its registers allow (stage B at
            // n = 1000 1.00 → 0.85 ms on the H100 with 512 threads instead of twelve
            // columns on 256; six columns on 512 threads gained nothing at n = 3000);
            // else twelve with GEN_R1_BLOCK.
            let threads_for = |f: &cudarc::driver::CudaFunction, cpt: usize, cap: usize| {
                let most = f
                    .max_threads_per_block()
                    .map(|t| (t.max(0) as usize).min(cap) / 32 * 32)
                    .unwrap_or(0);
                let want = n.div_ceil(cpt).div_ceil(32) * 32;
                (want <= most).then_some(want.max(32))
            };
            let (f, threads) = if let Some(t) =
                threads_for(&ks.two_phase_gen_rank_one_b_pipe2, R1_PIPE2_CPT, 1024)
            {
                (&ks.two_phase_gen_rank_one_b_pipe2, t)
            } else {
                (&ks.two_phase_gen_rank_one_b_pipe, GEN_R1_BLOCK as usize)
            };
            let mut c = cfg((1, 1), (threads as u32, 1));
            c.shared_mem_bytes = 4 * size_of::<T>() as u32;
            (f, c)
        };
        // SAFETY: matches two_phase_gen_rank_one_b_{f32,f64} and
        // two_phase_gen_rank_one_b_pipe_{f32,f64}(r: *mut T, ldr, m, n, w: *const T,
        // v: *const T, rot: *mut T, plane: *mut u32, k_off): r is an m×n view, w ≥ 1 and
        // v = n elements (asserted), rot/plane have room for k_off + nb rotations
        // (reserve); r, rot, plane are distinct &mut buffers and w, v shared borrows, so
        // nothing overlaps; grid 1; the pipe runs with n ≤ GEN_R1_BLOCK·12 and ld·n <
        // 2³² (r1_pipe_fits, checked above), the two-column variant with a block of
        // ≥ n/2 threads within the kernel's own limit (queried), the twelve-column one
        // with GEN_R1_BLOCK threads, and 4 elements of dynamic shared memory, as their
        // contracts require.
        unsafe {
            launch_kernel!(self, f, launch, "two_phase_gen_rank_one_b"; r.buf_mut(), &ldr, &m,
                &n, w, v, &mut list.rot, &mut list.plane, &k_off)
        }?;
        list.len += nb;
        if nb > 0 {
            list.span = list.span.max(nb + 1);
        }
        Ok(())
    }
}
