//! The cuBLAS parts of the device LU: TRSM for U₁₂, GEMM for the Schur update, the
//! explicit inverse of L₁₁ and U₁₂ by one GEMM, and the raw cuBLAS calls behind them.

#[allow(unused_imports)]
use super::*;
use crate::gpu::ffi::by_dtype;

/// cuBLAS `xGEMM` on raw device pointers of T: C := alpha·A·B + beta·C, no transposes,
/// `mnk` = (m, n, k), A m×k, B k×n, C m×n, each (pointer, ld).
///
/// # Safety
/// Each pointer addresses a live device allocation of T holding its block at its ld;
/// C is disjoint from A and B; `h` is a live handle bound to a stream on which the
/// caller orders this call after every write of A, B (and C when beta ≠ 0) and before
/// every other access of C.
pub(super) unsafe fn raw_gemm<T: GpuScalar>(
    h: cublas::cublasHandle_t,
    mnk: (i32, i32, i32),
    alpha: f64,
    a: (u64, i32),
    b: (u64, i32),
    beta: f64,
    c: (u64, i32),
) -> cublas::cublasStatus_t {
    let nn = cublas::cublasOperation_t::CUBLAS_OP_N;
    let (m, n, k) = mnk;
    // SAFETY: the caller's contract; by_dtype! picks the routine of T (sealed GpuScalar).
    unsafe {
        by_dtype!(T, cublas::cublasSgemm_v2, cublas::cublasDgemm_v2, |E| (
            h,
            nn,
            nn,
            m,
            n,
            k,
            &(alpha as E),
            a.0 as *const E,
            a.1,
            b.0 as *const E,
            b.1,
            &(beta as E),
            c.0 as *mut E,
            c.1
        ))
    }
}

/// cuBLAS `xTRSM` on raw device pointers of T: B := L⁻¹·B, L the m×m unit lower
/// triangle at `l` (ld `ldl`), B m×n at `b` (ld `ldb`).
///
/// # Safety
/// Both blocks lie in live device allocations of T at their ld; B does not overlap
/// the lower triangle of L; `h` is a live handle bound to a stream on which the caller
/// orders this call after every write of L and B and before every other access of B.
pub(super) unsafe fn raw_trsm_lower_unit<T: GpuScalar>(
    h: cublas::cublasHandle_t,
    m: i32,
    n: i32,
    l: u64,
    ldl: i32,
    b: u64,
    ldb: i32,
) -> cublas::cublasStatus_t {
    let (side, uplo, tr, dg) = (
        cublas::cublasSideMode_t::CUBLAS_SIDE_LEFT,
        cublas::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
        cublas::cublasOperation_t::CUBLAS_OP_N,
        cublas::cublasDiagType_t::CUBLAS_DIAG_UNIT,
    );
    // SAFETY: the caller's contract; by_dtype! picks the routine of T (sealed GpuScalar).
    unsafe {
        by_dtype!(T, cublas::cublasStrsm_v2, cublas::cublasDtrsm_v2, |E| (
            h,
            side,
            uplo,
            tr,
            dg,
            m,
            n,
            &(1.0 as E),
            l as *const E,
            ldl,
            b as *mut E,
            ldb
        ))
    }
}

/// cuBLAS `xGEAM` as a strided copy on raw device pointers of T: C := A (m×n), with
/// beta = 0 and C passed as B.
///
/// # Safety
/// A (ld `lda`) and C (ld `ldc`) are m×n blocks of live device allocations of T that
/// do not overlap; `h` is a live handle bound to a stream on which the caller orders
/// this call after every write of A and before every other access of C.
pub(super) unsafe fn raw_geam_copy<T: GpuScalar>(
    h: cublas::cublasHandle_t,
    m: i32,
    n: i32,
    a: u64,
    lda: i32,
    c: u64,
    ldc: i32,
) -> cublas::cublasStatus_t {
    let nn = cublas::cublasOperation_t::CUBLAS_OP_N;
    // SAFETY: the caller's contract; beta = 0, so B (= C) is not read; by_dtype! picks the routine
    // of T (sealed GpuScalar).
    unsafe {
        by_dtype!(T, cublas::cublasSgeam, cublas::cublasDgeam, |E| (
            h,
            nn,
            nn,
            m,
            n,
            &(1.0 as E),
            a as *const E,
            lda,
            &(0.0 as E),
            c as *const E,
            ldc,
            c as *mut E,
            ldc
        ))
    }
}

impl Gpu {
    /// A(c0..c0+w, cols) := L⁻¹·A(c0..c0+w, cols), L the unit lower w×w block at
    /// (c0, c0) of the same matrix (cuBLAS `xTRSM`).
    pub(super) fn lu_trsm_in<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        cols: core::ops::Range<usize>,
        lane: Lane<'_>,
    ) -> Result<()> {
        const OP: &str = "lu trsm";
        if cols.is_empty() || w == 0 {
            return Ok(());
        }
        assert!(c0 + w <= p.m && c0 + w <= cols.start && cols.end <= p.n);
        let (mi, ni, ld) = (
            int(OP, "w", w)?,
            int(OP, "cols", cols.len())?,
            int(OP, "lda", p.lda)?,
        );
        self.count_launch();
        // SAFETY: L is w×w at (c0, c0) and B is w×|cols| at (c0, cols.start), both with
        // ld lda inside the m×n matrix (asserted; LuPtrs' invariant); B's columns start
        // at or after c0+w, so B does not overlap the lower triangle of L that TRSM
        // reads; the lane's handle is bound to the lane's stream, on which the caller
        // ordered this call.
        let st = unsafe {
            raw_trsm_lower_unit::<T>(
                lane.blas,
                mi,
                ni,
                p.at::<T>(c0, c0),
                ld,
                p.at::<T>(c0, cols.start),
                ld,
            )
        };
        status(OP, st)
    }

    /// A(rows, cols) −= A(rows, inner)·A(inner, cols) within one matrix (cuBLAS
    /// `xGEMM`); the three blocks are disjoint.
    pub(super) fn lu_gemm_in<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        rows: core::ops::Range<usize>,
        inner: core::ops::Range<usize>,
        cols: core::ops::Range<usize>,
        lane: Lane<'_>,
    ) -> Result<()> {
        const OP: &str = "lu gemm";
        if rows.is_empty() || cols.is_empty() || inner.is_empty() {
            return Ok(());
        }
        assert!(
            rows.end <= p.m
                && cols.end <= p.n
                && inner.end <= cols.start
                && inner.end <= rows.start
        );
        let (mi, ni, ki) = (
            int(OP, "rows", rows.len())?,
            int(OP, "cols", cols.len())?,
            int(OP, "inner", inner.len())?,
        );
        let ld = int(OP, "lda", p.lda)?;
        self.count_launch();
        // SAFETY: A21 is |rows|×|inner|, A12 |inner|×|cols|, A22 |rows|×|cols|, all with
        // ld lda inside the m×n matrix (asserted; LuPtrs' invariant). A22 (rows ≥
        // inner.end, cols ≥ inner.end) is disjoint from A21 (columns < inner.end) and
        // from A12 (rows < inner.end); the lane's handle is bound to the lane's stream,
        // on which the caller ordered this call.
        let st = unsafe {
            raw_gemm::<T>(
                lane.blas,
                (mi, ni, ki),
                -1.0,
                (p.at::<T>(rows.start, inner.start), ld),
                (p.at::<T>(inner.start, cols.start), ld),
                1.0,
                (p.at::<T>(rows.start, cols.start), ld),
            )
        };
        status(OP, st)
    }

    /// [`Gpu::lu_l11_inverse`] where U₁₂ goes by the inverse (the scratch exists).
    pub(super) fn lu_l11_inverse_if<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        slot: usize,
        lane: Lane<'_>,
    ) -> Result<()> {
        if p.u12.is_some() {
            self.lu_l11_inverse::<T>(p, c0, w, slot, lane)
        } else {
            Ok(())
        }
    }

    /// U₁₂ := L₁₁⁻¹·A(c0..c0+w, cols) on the main lane: by one GEMM with the inverse
    /// in `slot` ([`Gpu::lu_u12_by_inverse`]) where the scratch exists and `cols` is
    /// wider than the panel, else by TRSM.
    pub(super) fn lu_u12<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        cols: core::ops::Range<usize>,
        slot: usize,
    ) -> Result<()> {
        if p.u12.is_some() && cols.len() > w {
            self.lu_u12_by_inverse::<T>(p, c0, w, cols, slot)
        } else {
            self.lu_trsm_in::<T>(p, c0, w, cols, self.main_lane())
        }
    }

    /// L₁₁⁻¹ of the panel c0..c0+w into inverse slot `slot` (w×w, ld nb): the slot
    /// := I (`xGEAM` from the identity), then L₁₁⁻¹·I (`xTRSM`), on `lane` right after
    /// the panel (U₁₂ by one GEMM instead of a TRSM across the matrix).
    pub(super) fn lu_l11_inverse<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        slot: usize,
        lane: Lane<'_>,
    ) -> Result<()> {
        const OP: &str = "lu L11 inverse";
        let u = p.u12.as_ref().expect("U12 scratch present");
        assert!(w >= 1 && w <= u.nb && slot < 2 && c0 + w <= p.m.min(p.n));
        let (wi, ldl, ld) = (
            int(OP, "w", w)?,
            int(OP, "nb", u.nb)?,
            int(OP, "lda", p.lda)?,
        );
        let elem = core::mem::size_of::<T>() as u64;
        let inv = u.linv + (slot * u.nb * u.nb) as u64 * elem;
        self.count_launch();
        // SAFETY: eye and both inverse slots are nb×nb (ld nb) device buffers of T held
        // by lu_factor_in_place (U12Ptrs' invariant), w ≤ nb (asserted); geam writes
        // the slot from eye with beta = 0 (the slot is B and C, in place as cuBLAS
        // allows with equal ld); the lane's handle is bound to the lane's stream, where
        // the caller orders this after the panel and after every earlier use of this
        // slot (the slots alternate by panel, lu_lookahead_steps).
        let st = unsafe { raw_geam_copy::<T>(lane.blas, wi, wi, u.eye, ldl, inv, ldl) };
        status(OP, st)?;
        self.count_launch();
        // SAFETY: L₁₁ is w×w at (c0, c0) with ld lda inside the matrix (asserted,
        // LuPtrs' invariant), the slot w×w with ld nb in its own buffer, disjoint from
        // the matrix; ordered on the lane's stream after the geam above.
        let st =
            unsafe { raw_trsm_lower_unit::<T>(lane.blas, wi, wi, p.at::<T>(c0, c0), ld, inv, ldl) };
        status(OP, st)
    }

    /// U₁₂ := L₁₁⁻¹·A(c0..c0+w, cols) by one GEMM with the inverse in `slot` (from
    /// [`Gpu::lu_l11_inverse`] for this panel): A₁₂ is first copied to the scratch
    /// (`xGEAM`), then A₁₂ := L₁₁⁻¹·scratch. On the main lane.
    pub(super) fn lu_u12_by_inverse<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        cols: core::ops::Range<usize>,
        slot: usize,
    ) -> Result<()> {
        const OP: &str = "lu U12";
        if cols.is_empty() {
            return Ok(());
        }
        let u = p.u12.as_ref().expect("U12 scratch present");
        assert!(w >= 1 && w <= u.nb && slot < 2 && c0 + w <= cols.start && cols.end <= p.n);
        let (wi, ci, ldl, ld) = (
            int(OP, "w", w)?,
            int(OP, "cols", cols.len())?,
            int(OP, "nb", u.nb)?,
            int(OP, "lda", p.lda)?,
        );
        let elem = core::mem::size_of::<T>() as u64;
        let inv = u.linv + (slot * u.nb * u.nb) as u64 * elem;
        let h = self.main_lane().blas;
        let a12 = p.at::<T>(c0, cols.start);
        self.count_launch();
        // SAFETY: A₁₂ is w×|cols| at (c0, cols.start) with ld lda inside the matrix
        // (asserted, LuPtrs' invariant); the scratch holds nb·n ≥ w·|cols| elements
        // (ld nb, U12Ptrs' invariant, |cols| ≤ n asserted) and is disjoint from the
        // matrix; the handle is bound to the main stream, where every use of the scratch
        // is ordered.
        let st = unsafe { raw_geam_copy::<T>(h, wi, ci, a12, ld, u.scratch, ldl) };
        status(OP, st)?;
        self.count_launch();
        // SAFETY: the inverse slot (w×w, ld nb) and the scratch (w×|cols|, ld nb) are
        // scratch buffers disjoint from A₁₂, which is written with beta = 0; the slot
        // was written by lu_l11_inverse for this panel, ordered before this call by the
        // caller (same stream, or the look-ahead event the main stream waited for).
        let st = unsafe {
            raw_gemm::<T>(
                h,
                (wi, ci, wi),
                1.0,
                (inv, ldl),
                (u.scratch, ldl),
                0.0,
                (a12, ld),
            )
        };
        status(OP, st)
    }
}
