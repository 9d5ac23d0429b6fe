//! GPU driver of the blocked LU with partial pivoting (docs/algorithms.md#lu-factorisation,
//! docs/algorithms.md#lu-pivot-application
//! corrected): the same algorithm as [`CpuLu`](super::CpuLu) (same pivots), with the
//! panel (one cooperative multi-block launch per panel by default, see
//! [`LuParams::coop_panel`]) and the interchanges in Rust kernels, TRSM/GEMM through
//! cuBLAS and optional look-ahead (`Gpu::lu_factor_in_place`, gpu/kernels_lu.rs). Solve: laswp on B, then two
//! cuBLAS TRSMs. After the factorisation the pivots and the diagonal of U (2·min(m, n)
//! values) come back to the host to check singularity and for `det_sign_log`.

use std::sync::Arc;

use cudarc::driver::CudaSlice;

use super::U12_INVERSE_MIN_BLOCK;
use super::{
    check_params, check_pivots, check_solve, det_sign_log, perm_from_ipiv, plan, unpack_l, unpack_u,
};
use super::{
    gpu_default_block_size, LuParams, DEFAULT_COOP_ROWS, DEFAULT_FUSED_ROWS, GPU_CLUSTER_LEAF_BASE,
};
use super::{DEFAULT_CLUSTER_LEAF_MIN, DEFAULT_LOOKAHEAD, DEFAULT_PANEL_BASE};
use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::gpu::ffi::blas::{Diag, Op, Side, Uplo};
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::launch::lu::{LuPanelOpts, LuPhaseTimes};
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{alloc_err, driver_err, Gpu, GpuScalar};

/// The GPU panel options of `params`.
///
/// # Errors
/// [`Error::InvalidParam`] for `coop_rows` = 0.
fn panel_opts(op: &'static str, params: &LuParams, nb: usize) -> Result<LuPanelOpts> {
    let coop_rows = params.coop_rows.unwrap_or(DEFAULT_COOP_ROWS);
    if coop_rows == 0 {
        return Err(Error::InvalidParam {
            op,
            what: "coop_rows",
            why: "must be at least 1".into(),
        });
    }
    Ok(LuPanelOpts {
        fused_rows: params.fused_rows.unwrap_or(DEFAULT_FUSED_ROWS),
        coop: params.coop_panel.unwrap_or(true),
        coop_rows,
        coop_smem: params.coop_smem.unwrap_or(true),
        lookahead: params.lookahead.unwrap_or(DEFAULT_LOOKAHEAD),
        cluster: params.cluster_panel.unwrap_or(true),
        cluster_leaf_min: params.cluster_leaf_min.unwrap_or(DEFAULT_CLUSTER_LEAF_MIN),
        u12_inverse: params.u12_by_inverse.unwrap_or(nb >= U12_INVERSE_MIN_BLOCK),
    })
}

/// Whether the cluster panel can run: the device has the sm_90 kernels and neither it
/// nor the cooperative panel is switched off.
fn clusters_on(gpu: &Gpu, params: &LuParams) -> bool {
    gpu.sm90.is_some() && params.cluster_panel != Some(false) && params.coop_panel != Some(false)
}

/// `params` with the GPU's default block size filled in where it is `None`
/// ([`gpu_default_block_size`]).
fn with_gpu_block_size(gpu: &Gpu, m: usize, n: usize, params: LuParams) -> LuParams {
    let clusters = clusters_on(gpu, &params);
    let mut p = params;
    p.block_size = Some(
        params
            .block_size
            .unwrap_or_else(|| gpu_default_block_size(m, n, clusters)),
    );
    p
}

/// The recursive-panel base on the GPU: with the cooperative panel and no explicit
/// `panel_base`, the block size (one launch per panel), at most
/// [`GPU_CLUSTER_LEAF_BASE`] where the cluster panel runs; else the planned base.
fn gpu_base(gpu: &Gpu, params: &LuParams, opts: &LuPanelOpts, nb: usize, planned: usize) -> usize {
    if opts.coop && params.panel_base.is_none() {
        if clusters_on(gpu, params) {
            nb.min(GPU_CLUSTER_LEAF_BASE)
        } else {
            nb
        }
    } else {
        planned
    }
}

/// An LU factorisation PA = LU held on the GPU.
pub struct GpuLu<T: GpuScalar> {
    gpu: Arc<Gpu>,
    /// Packed factors, m×n (ld padded).
    lu: DevMat<T>,
    /// Pivots on the device (0-based absolute rows), min(m, n).
    ipiv_dev: CudaSlice<u32>,
    /// The same pivots on the host.
    ipiv: Vec<usize>,
    /// u_jj on the host, min(m, n).
    diag: Vec<T>,
    /// Phase times when profiled.
    profile: Option<LuPhaseTimes>,
}

impl<T: GpuScalar> core::fmt::Debug for GpuLu<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GpuLu")
            .field("m", &self.lu.nrows())
            .field("n", &self.lu.ncols())
            .finish_non_exhaustive()
    }
}

impl<T: GpuScalar> GpuLu<T> {
    /// Uploads the m×n `a` and factorises it on the GPU as PA = LU.
    ///
    /// # Errors
    /// As [`CpuLu::factorize`](super::CpuLu::factorize) (validation is the same
    /// shared `plan`), plus [`Error::OutOfMemory`], [`Error::Driver`],
    /// [`Error::Cublas`] from the device.
    pub fn factorize(gpu: &Arc<Gpu>, a: MatRef<'_, T>, params: LuParams) -> Result<Self> {
        const OP: &str = "GpuLu::factorize";
        let params = with_gpu_block_size(gpu, a.nrows(), a.ncols(), params);
        let plan = plan(OP, a, &params)?;
        let opts = panel_opts(OP, &params, plan.nb)?;
        let base = gpu_base(gpu, &params, &opts, plan.nb, plan.base);
        let lu = DevMat::from_host(gpu, a)?;
        Self::run(
            gpu,
            lu,
            plan.nb,
            base,
            OP,
            Some(plan.abs_tol),
            params.profile,
            opts,
        )
    }

    /// Factorises a matrix already on the device, taking it over (benchmarks:
    /// no host transfer of A). The input is not scanned on the host: the
    /// singularity tolerance is `singular_tol`·max_j |u_jj| (default max(m, n)·u),
    /// and a NaN/∞ input surfaces as [`Error::Singular`] at a non-finite pivot.
    ///
    /// # Errors
    /// [`Error::Shape`] for an empty `a`; [`Error::InvalidParam`] for bad `params`;
    /// [`Error::Singular`];
    /// [`Error::OutOfMemory`], [`Error::Driver`], [`Error::Cublas`].
    pub fn factorize_dev(gpu: &Arc<Gpu>, a: DevMat<T>, params: LuParams) -> Result<Self> {
        const OP: &str = "GpuLu::factorize_dev";
        let (m, n) = (a.nrows(), a.ncols());
        // the shape and parameters, checked as the host path checks them
        let p = with_gpu_block_size(gpu, m, n, params);
        check_params::<T>(OP, m, n, &p)?;
        let nb = p.block_size.unwrap_or(1).min(m.min(n).max(1));
        let opts = panel_opts(OP, &params, nb)?;
        let base = params.panel_base.unwrap_or(DEFAULT_PANEL_BASE).min(nb);
        let base = gpu_base(gpu, &params, &opts, nb, base);
        let mut me = Self::run(gpu, a, nb, base, OP, None, params.profile, opts)?;
        let rel = params
            .singular_tol
            .unwrap_or(m.max(n) as f64 * T::UNIT_ROUNDOFF);
        let dmax = me
            .diag
            .iter()
            .map(|d| d.to_f64().abs())
            .fold(0.0f64, |a, b| if b.is_finite() { a.max(b) } else { a });
        check_pivots(OP, &me.diag, rel * dmax)?;
        me.gpu = gpu.clone();
        Ok(me)
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        gpu: &Arc<Gpu>,
        mut lu: DevMat<T>,
        nb: usize,
        base: usize,
        op: &'static str,
        abs_tol: Option<f64>,
        profile: bool,
        opts: LuPanelOpts,
    ) -> Result<Self> {
        let k = lu.nrows().min(lu.ncols());
        let s = gpu.stream();
        let mut ipiv_dev = s
            .alloc_zeroed::<u32>(k.max(1))
            .map_err(alloc_err("LU pivots", 4 * k.max(1)))?;
        let mut diag_dev = s.alloc_zeroed::<T>(k.max(1)).map_err(alloc_err(
            "LU diagonal",
            core::mem::size_of::<T>() * k.max(1),
        ))?;
        let mut times = LuPhaseTimes::default();
        gpu.lu_factor_in_place(
            &mut lu,
            &mut ipiv_dev,
            &mut diag_dev,
            nb,
            base,
            opts,
            profile.then_some(&mut times),
        )?;
        let piv = s
            .clone_dtoh(&ipiv_dev)
            .map_err(driver_err("reading LU pivots"))?;
        let mut diag = s
            .clone_dtoh(&diag_dev)
            .map_err(driver_err("reading LU diagonal"))?;
        s.synchronize().map_err(driver_err("LU factorisation"))?;
        diag.truncate(k);
        let ipiv: Vec<usize> = piv.iter().take(k).map(|&p| p as usize).collect();
        if ipiv
            .iter()
            .enumerate()
            .any(|(j, &p)| p < j || p >= lu.nrows())
        {
            return Err(Error::Driver(
                format!("{op}: device returned invalid pivots").into(),
            ));
        }
        if let Some(t) = abs_tol {
            check_pivots(op, &diag, t)?;
        }
        Ok(Self {
            gpu: gpu.clone(),
            lu,
            ipiv_dev,
            ipiv,
            diag,
            profile: profile.then_some(times),
        })
    }

    /// Time per phase of the factorisation, when [`LuParams::profile`] was set
    /// (events around each phase serialise nothing but add a few µs per panel).
    pub fn profile(&self) -> Option<LuPhaseTimes> {
        self.profile
    }

    /// The block size a factorisation of an m×n matrix with `params` uses on `gpu`:
    /// `params.block_size`, else [`gpu_default_block_size`] (64 up to 8192 where the
    /// cluster panel runs, else [`super::default_block_size`]), at most min(m, n).
    ///
    /// ```no_run
    /// # fn main() -> cuqr::Result<()> {
    /// use cuqr::lu::{GpuLu, LuParams};
    /// let gpu = cuqr::Gpu::new(0)?;
    /// let nb = GpuLu::<f64>::block_size_for(&gpu, 8192, 8192, &LuParams::default());
    /// assert!(nb == 64 || nb == 128);
    /// # Ok(())
    /// # }
    /// ```
    pub fn block_size_for(gpu: &Gpu, m: usize, n: usize, params: &LuParams) -> usize {
        with_gpu_block_size(gpu, m, n, *params)
            .block_size
            .unwrap_or(1)
            .min(m.min(n).max(1))
    }

    /// Rows m.
    pub fn nrows(&self) -> usize {
        self.lu.nrows()
    }

    /// Columns n.
    pub fn ncols(&self) -> usize {
        self.lu.ncols()
    }

    /// The packed factors on the device (L below the diagonal, U on and above).
    pub fn device(&self) -> &DevMat<T> {
        &self.lu
    }

    /// Downloads the packed factors.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn packed(&self) -> Result<Mat<T>> {
        self.lu.to_host(&self.gpu)
    }

    /// LAPACK-style interchanges (0-based): at step j rows j and `ipiv()[j]` swapped.
    pub fn ipiv(&self) -> &[usize] {
        &self.ipiv
    }

    /// The unit lower-trapezoidal L, m×min(m, n) (downloaded).
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn l(&self) -> Result<Mat<T>> {
        Ok(unpack_l(self.packed()?.as_ref()))
    }

    /// The upper-trapezoidal U, min(m, n)×n (downloaded).
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn u(&self) -> Result<Mat<T>> {
        Ok(unpack_u(self.packed()?.as_ref()))
    }

    /// The row permutation: row i of PA is row `perm()[i]` of A.
    pub fn perm(&self) -> Vec<usize> {
        perm_from_ipiv(&self.ipiv, self.lu.nrows())
    }

    /// (sign, ln|det A|) from the pivots (no device work).
    pub fn det_sign_log(&self) -> (f64, f64) {
        det_sign_log(&self.diag, &self.ipiv)
    }

    /// Solves A·X = B for square A on the GPU (B is n×q): laswp, then L and U TRSMs.
    ///
    /// # Errors
    /// [`Error::Shape`] if A is not square or B has not n rows;
    /// [`Error::NonFinite`] for a NaN/∞ in B; device errors.
    #[must_use = "solve returns X; B is not modified"]
    pub fn solve(&self, b: MatRef<'_, T>) -> Result<Mat<T>> {
        check_solve("GpuLu::solve", self.nrows(), self.ncols(), b)?;
        let mut x = DevMat::from_host(&self.gpu, b)?;
        self.solve_in_place_dev(&mut x)?;
        x.to_host(&self.gpu)
    }

    /// Overwrites the device matrix `b` (n×q) with A⁻¹B (benchmarks: no transfers).
    ///
    /// # Errors
    /// [`Error::Shape`] if A is not square or `b` has not n rows; device errors.
    pub fn solve_in_place_dev(&self, b: &mut DevMat<T>) -> Result<()> {
        const OP: &str = "GpuLu::solve";
        let n = self.nrows();
        if self.ncols() != n {
            return Err(Error::Shape {
                op: OP,
                what: "columns of A (solve needs a square A)",
                got: self.ncols(),
                expected: n,
            });
        }
        if b.nrows() != n {
            return Err(Error::Shape {
                op: OP,
                what: "rows of B",
                got: b.nrows(),
                expected: n,
            });
        }
        let g = &self.gpu;
        g.lu_laswp_rows(&mut b.view_mut(), &self.ipiv_dev, n)?;
        let a = self.lu.view();
        g.trsm(
            Side::Left,
            Uplo::Lower,
            Op::N,
            Diag::Unit,
            T::ONE,
            &a,
            &mut b.view_mut(),
        )?;
        crate::gpu::algo::reduced::upper_solve(g, Side::Left, Op::N, &a, &mut b.view_mut())?;
        Ok(())
    }
}
