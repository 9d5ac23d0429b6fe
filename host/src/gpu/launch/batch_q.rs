//! Batched thin-Q states, a team of lanes a problem (`batch_q_*`, gpu-kernels/src/batch_q.rs;
//! docs/algorithms.md#batched-states).

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};

use crate::base::error::Result;
use crate::gpu::launch::{launch_config, launch_kernel};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// Largest n the kernels take (one lane a column of R).
pub(crate) const BATCH_Q_MAX_N: usize = 32;
/// Dynamic shared memory a launch may use without opting in (bytes).
pub(crate) const BATCH_Q_SMEM_LIMIT: usize = 48 * 1024;

/// Shared-memory elements of each kernel (the kernel crate's `batch_q::smem`).
pub(crate) mod smem {
    pub(crate) const fn factor(m: usize, n: usize) -> usize {
        2 * m * n + n
    }
    pub(crate) const fn rank_one(m: usize, n: usize) -> usize {
        m * (n + 1) + (n + 1) * n + 6 * n
    }
    pub(crate) const fn insert_rows(m: usize, n: usize, p: usize) -> usize {
        (m + p) * (n + p) + (n + p) * n + 2 * p * n
    }
    pub(crate) const fn delete_rows(m: usize, n: usize) -> usize {
        m * (n + 1) + (n + 1) * n + 3 * n
    }
    pub(crate) const fn delete_cols(m: usize, n: usize) -> usize {
        m * n + n * n + 2 * n
    }
    pub(crate) const fn insert_cols(m: usize, n: usize, p: usize) -> usize {
        m * (n + p) + (n + p) * (n + p) + 4 * (n + p)
    }
    pub(crate) const fn shift_col(m: usize, n: usize) -> usize {
        m * (n + 1) + n * n + 4 * n
    }
    pub(crate) const fn refresh(m: usize, n: usize) -> usize {
        factor(m, n)
    }
    pub(crate) const fn solve(n: usize) -> usize {
        n * n + n
    }
}

/// The operations of `batch_q_complement` (gpu-kernels/src/batch_q/complement.rs; the
/// values and shared-memory sizes are the kernel crate's).
pub(crate) mod complement_op {
    pub(crate) const BUILD: u32 = 0;
    pub(crate) const REPLACE: u32 = 1;
    pub(crate) const ADD_ROWS: u32 = 2;
    pub(crate) const DROP_ROWS: u32 = 3;
    pub(crate) const ADD_COLS: u32 = 4;
    pub(crate) const DROP_DIRS: u32 = 5;
    pub(crate) const MEASURE: u32 = 6;
    /// Largest p of `DROP_ROWS` and `DROP_DIRS` a launch.
    pub(crate) const MAX_DROP: usize = 32;
    /// Columns of Q₂ a `BUILD` forms at a time in shared memory.
    pub(crate) const BUILD_BLOCK: usize = 8;

    /// Shared-memory elements of a launch (at least one).
    pub(crate) const fn smem(op: u32, m: usize, n: usize, c: usize, p: usize) -> usize {
        let e = match op {
            BUILD => m * n + n + m * BUILD_BLOCK,
            REPLACE => c,
            DROP_ROWS | DROP_DIRS => c * p + p * p + p + m * p,
            MEASURE => c + n,
            _ => 0,
        };
        if e == 0 {
            1
        } else {
            e
        }
    }

    /// Q₂'s rows and columns after `op` on an m×c complement.
    pub(crate) const fn output(op: u32, (m, c): (usize, usize), p: usize) -> (usize, usize) {
        match op {
            ADD_ROWS => (m + p, c + p),
            DROP_ROWS => (m - p, c - p),
            ADD_COLS => (m, c + p),
            DROP_DIRS => (m, c - p),
            _ => (m, c),
        }
    }
}

/// A complement launch: the operation, the batch, (m, n, c) before it and (k0, p).
pub(crate) type ComplementOp = (u32, usize, (usize, usize, usize), (usize, usize));

/// A state's device buffers: Q₁ (batch·m·n, each problem column-major), R (batch·n·n,
/// row-major) and b (batch·m).
pub(crate) struct QView<'a, T> {
    pub q: CudaView<'a, T>,
    pub r: CudaView<'a, T>,
    pub b: CudaView<'a, T>,
}

/// Mutable [`QView`].
pub(crate) struct QViewMut<'a, T> {
    pub q: CudaViewMut<'a, T>,
    pub r: CudaViewMut<'a, T>,
    pub b: CudaViewMut<'a, T>,
}

/// Batch size, problem shape and lanes a problem (a power of two, n ≤ team ≤ 32: a block
/// of one warp holds 32/team problems).
#[derive(Clone, Copy, Debug)]
pub(crate) struct QShape {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub team: usize,
}

/// The default lanes a problem for m×n: one row a lane up to a whole warp (the smallest
/// power of two ≥ max(m, n), at most 32), and no more problems a warp than the shared memory
/// of `elems` elements a problem (of `size` bytes each) allows. Measured on an H200 at
/// 64×8, fewer lanes a problem (8 or 16, several problems a warp) were slower than 32: the
/// blocks' larger shared memory leaves fewer warps resident (docs/performance.md).
pub(crate) fn default_team(m: usize, n: usize, elems: usize, size: usize) -> usize {
    let mut team = m.max(n).clamp(1, 32).next_power_of_two();
    while team < 32 && (32 / team) * elems * size > BATCH_Q_SMEM_LIMIT {
        team *= 2;
    }
    team
}

impl QShape {
    fn check(&self, s: &QView<'_, impl Copy>) {
        let (b, m, n) = (self.batch, self.m, self.n);
        assert!((1..=BATCH_Q_MAX_N).contains(&n) && m >= n);
        assert!(s.q.len() >= b * m * n && s.r.len() >= b * n * n && s.b.len() >= b * m);
    }
    fn check_mut(&self, s: &QViewMut<'_, impl Copy>) {
        let (b, m, n) = (self.batch, self.m, self.n);
        assert!(s.q.len() >= b * m * n && s.r.len() >= b * n * n && s.b.len() >= b * m);
    }
    fn grid(&self) -> (u32, u32) {
        assert!(self.team.is_power_of_two() && self.n <= self.team && self.team <= 32);
        let blocks = self.batch.div_ceil(32 / self.team);
        (
            u32::try_from(blocks).expect("batch fits a grid dimension"),
            1,
        )
    }

    /// Dynamic shared memory of a block: 32/team problems of `elems` elements.
    fn smem_bytes<T>(&self, elems: usize) -> usize {
        let bytes = (32 / self.team) * elems * std::mem::size_of::<T>();
        assert!(bytes <= BATCH_Q_SMEM_LIMIT, "batch_q shared memory");
        bytes
    }
}

impl Gpu {
    /// Launches `batch_q_factor_<T>`: A (batch·m·n row-major) and b (batch·m) into `out`.
    ///
    /// # Errors
    /// [`crate::Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// On buffers shorter than the shape needs, n outside 1..=32, m < n, or shared memory
    /// past [`BATCH_Q_SMEM_LIMIT`] (cuqr bugs: the caller validates).
    pub(crate) fn batch_q_factor<T: GpuScalar>(
        &self,
        shape: QShape,
        (a, b): (CudaView<'_, T>, CudaView<'_, T>),
        out: QViewMut<'_, T>,
        status: &mut CudaSlice<u32>,
    ) -> Result<()> {
        let QShape { batch, m, n, team } = shape;
        assert!((1..=BATCH_Q_MAX_N).contains(&n) && m >= n);
        assert!(a.len() >= batch * m * n && b.len() >= batch * m && status.len() >= batch);
        shape.check_mut(&out);
        if batch == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).batch_q_factor;
        let cfg = launch_config(
            shape.grid(),
            (32, 1),
            shape.smem_bytes::<T>(smem::factor(m, n)),
        );
        let mut o = out;
        // SAFETY: matches batch_q_factor_<T>(a, b, q, r, b_out, status, batch, m, n, team) of
        // gpu-kernels/src/batch_q.rs: a and b hold batch·m·n and batch·m, the outputs
        // batch·m·n, batch·n·n and batch·m, status batch (asserted); the outputs are
        // distinct mutable views aliasing no input; 1 ≤ n ≤ 32, m ≥ n; grid
        // ⌈batch/(32/team)⌉, block 32 (team checked in grid()), shared memory
        // (32/team)·smem::factor(m, n) elements as the contract says.
        unsafe {
            launch_kernel!(self, f, cfg, "batch_q_factor"; &a, &b, &mut o.q, &mut o.r,
                &mut o.b, &mut *status, &batch, &m, &n, &team)
        }?;
        Ok(())
    }

    /// Launches `batch_q_rank_one_<T>`: Q₁ and R of `state` updated in place by `kk`
    /// rank-one terms, U (batch·m·kk) and V (batch·n·kk); a refusing problem is left as it
    /// was.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    ///
    /// # Panics
    /// As [`Gpu::batch_q_factor`].
    pub(crate) fn batch_q_rank_one<T: GpuScalar>(
        &self,
        shape: QShape,
        (mut q, mut r): (CudaViewMut<'_, T>, CudaViewMut<'_, T>),
        (u, v, kk): (CudaView<'_, T>, CudaView<'_, T>, usize),
        status: &mut CudaSlice<u32>,
        export: Option<CudaViewMut<'_, T>>,
    ) -> Result<()> {
        let QShape { batch, m, n, team } = shape;
        assert!((1..=BATCH_Q_MAX_N).contains(&n) && m >= n && kk >= 1);
        assert!(export
            .as_ref()
            .is_none_or(|e| e.len() >= batch * kk * 2 * m));
        assert!(q.len() >= batch * m * n && r.len() >= batch * n * n);
        assert!(u.len() >= batch * m * kk && v.len() >= batch * n * kk && status.len() >= batch);
        if batch == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).batch_q_rank_one;
        let cfg = launch_config(
            shape.grid(),
            (32, 1),
            shape.smem_bytes::<T>(smem::rank_one(m, n)),
        );
        // SAFETY: matches batch_q_rank_one_<T>(q, r, u, v, status, export, batch, m, n, kk, team): q
        // and r hold batch·m·n and batch·n·n (read-write, in place: each team reads its
        // problem before writing it), u and v batch·m·kk and batch·n·kk, status batch
        // (asserted); u, v and
        // status are other buffers than q and r (distinct borrows); 1 ≤ n ≤ 32, m ≥ n;
        // grid ⌈batch/(32/team)⌉, block 32 (team checked in grid()), shared memory
        // (32/team)·smem::rank_one(m, n). `export` (a full-Q state's) holds batch·kk·2·m
        // (asserted), another buffer; without it the pointer is null (a u64 0), as the
        // contract allows.
        unsafe {
            let null = 0u64;
            match export {
                Some(mut e) => launch_kernel!(self, f, cfg, "batch_q_rank_one"; &mut q, &mut r,
                    &u, &v, &mut *status, &mut e, &batch, &m, &n, &kk, &team),
                None => launch_kernel!(self, f, cfg, "batch_q_rank_one"; &mut q, &mut r, &u,
                    &v, &mut *status, &null, &batch, &m, &n, &kk, &team),
            }
        }?;
        Ok(())
    }

    /// Launches `batch_q_insert_rows_<T>`: p rows (batch·p·n row-major) with right-hand
    /// sides (batch·p) at k0, R and b scaled by `scale` first, into `out` (m + p rows).
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    ///
    /// # Panics
    /// As [`Gpu::batch_q_factor`], and for k0 > m or p = 0.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn batch_q_insert_rows<T: GpuScalar>(
        &self,
        shape: QShape,
        input: QView<'_, T>,
        (rows, rhs): (CudaView<'_, T>, CudaView<'_, T>),
        (k0, p, scale): (usize, usize, T),
        out: QViewMut<'_, T>,
        status: &mut CudaSlice<u32>,
        export: Option<CudaViewMut<'_, T>>,
    ) -> Result<()> {
        let QShape { batch, m, n, team } = shape;
        shape.check(&input);
        QShape { m: m + p, ..shape }.check_mut(&out);
        assert!(k0 <= m && p >= 1);
        assert!(export
            .as_ref()
            .is_none_or(|e| e.len() >= batch * (m + p) * p));
        assert!(rows.len() >= batch * p * n && rhs.len() >= batch * p && status.len() >= batch);
        if batch == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).batch_q_insert_rows;
        let cfg = launch_config(
            shape.grid(),
            (32, 1),
            shape.smem_bytes::<T>(smem::insert_rows(m, n, p)),
        );
        let mut o = out;
        // SAFETY: matches batch_q_insert_rows_<T>(q_in, r_in, b_in, rows, rhs, q_out, r_out,
        // b_out, status, export, batch, m, n, k0, p, scale, team): the input state holds batch·m·n,
        // batch·n·n, batch·m, the rows batch·p·n and batch·p, the outputs batch·(m+p)·n,
        // batch·n·n, batch·(m+p), status batch (asserted); outputs distinct from the inputs;
        // k0 ≤ m, p ≥ 1, 1 ≤ n ≤ 32; grid ⌈batch/(32/team)⌉, block 32 (team checked in
        // grid()), shared memory
        // (32/team)·smem::insert_rows(m, n, p). `export` (a full-Q state's) holds
        // batch·(m+p)·p (asserted), another buffer; without it the pointer is null.
        unsafe {
            let null = 0u64;
            match export {
                Some(mut e) => launch_kernel!(self, f, cfg, "batch_q_insert_rows"; &input.q,
                    &input.r, &input.b, &rows, &rhs, &mut o.q, &mut o.r, &mut o.b,
                    &mut *status, &mut e, &batch, &m, &n, &k0, &p, &scale, &team),
                None => launch_kernel!(self, f, cfg, "batch_q_insert_rows"; &input.q,
                    &input.r, &input.b, &rows, &rhs, &mut o.q, &mut o.r, &mut o.b,
                    &mut *status, &null, &batch, &m, &n, &k0, &p, &scale, &team),
            }
        }?;
        Ok(())
    }

    /// Launches `batch_q_delete_rows_<T>`: rows k0..k0+p out of `input` into `out` (m − p
    /// rows); a refusing problem writes `fallback` (shape (m − p)×n) when given.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    ///
    /// # Panics
    /// As [`Gpu::batch_q_factor`], and for k0 + p > m, p = 0 or m − p < n.
    pub(crate) fn batch_q_delete_rows<T: GpuScalar>(
        &self,
        shape: QShape,
        input: QView<'_, T>,
        (k0, p): (usize, usize),
        out: QViewMut<'_, T>,
        fallback: Option<QView<'_, T>>,
        status: &mut CudaSlice<u32>,
    ) -> Result<()> {
        let QShape { batch, m, n, team } = shape;
        shape.check(&input);
        assert!(p >= 1 && k0 + p <= m && m - p >= n);
        let smaller = QShape { m: m - p, ..shape };
        smaller.check_mut(&out);
        if let Some(fb) = &fallback {
            smaller.check(fb);
        }
        assert!(status.len() >= batch);
        if batch == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).batch_q_delete_rows;
        let cfg = launch_config(
            shape.grid(),
            (32, 1),
            shape.smem_bytes::<T>(smem::delete_rows(m, n)),
        );
        let mut o = out;
        let null = 0u64;
        // SAFETY: matches batch_q_delete_rows_<T>(q_in, r_in, b_in, q_out, r_out, b_out,
        // q_fb, r_fb, b_fb, status, batch, m, n, k0, p, team): the input holds batch·m·n,
        // batch·n·n, batch·m, the outputs and the fallback (when given) batch·(m−p)·n,
        // batch·n·n, batch·(m−p) (asserted); without a fallback its three pointers are null
        // (a u64 0, the pointer's size), as the contract allows; outputs distinct from
        // every input; k0 + p ≤ m, m − p ≥ n ≥ 1, n ≤ 32; grid ⌈batch/(32/team)⌉, block 32
        // (team checked in grid()), shared memory (32/team)·smem::delete_rows(m, n).
        unsafe {
            match &fallback {
                Some(fb) => launch_kernel!(self, f, cfg, "batch_q_delete_rows"; &input.q,
                    &input.r, &input.b, &mut o.q, &mut o.r, &mut o.b, &fb.q, &fb.r, &fb.b,
                    &mut *status, &batch, &m, &n, &k0, &p, &team),
                None => launch_kernel!(self, f, cfg, "batch_q_delete_rows"; &input.q,
                    &input.r, &input.b, &mut o.q, &mut o.r, &mut o.b, &null, &null, &null,
                    &mut *status, &batch, &m, &n, &k0, &p, &team),
            }
        }?;
        Ok(())
    }

    /// Launches `batch_q_delete_cols_<T>`: columns k0..k0+p out of Q₁ and R of `input` into
    /// `q_out` (batch·m·(n−p)) and `r_out` (batch·(n−p)²); b does not change.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    ///
    /// # Panics
    /// As [`Gpu::batch_q_factor`], and for k0 + p > n, p = 0 or p ≥ n.
    pub(crate) fn batch_q_delete_cols<T: GpuScalar>(
        &self,
        shape: QShape,
        input: QView<'_, T>,
        (k0, p): (usize, usize),
        (mut q_out, mut r_out): (CudaViewMut<'_, T>, CudaViewMut<'_, T>),
        status: &mut CudaSlice<u32>,
        export: Option<CudaViewMut<'_, T>>,
    ) -> Result<()> {
        let QShape { batch, m, n, team } = shape;
        shape.check(&input);
        assert!(p >= 1 && p < n && k0 + p <= n);
        assert!(export.as_ref().is_none_or(|e| e.len() >= batch * m * p));
        let no = n - p;
        assert!(q_out.len() >= batch * m * no && r_out.len() >= batch * no * no);
        assert!(status.len() >= batch);
        if batch == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).batch_q_delete_cols;
        let cfg = launch_config(
            shape.grid(),
            (32, 1),
            shape.smem_bytes::<T>(smem::delete_cols(m, n)),
        );
        // SAFETY: matches batch_q_delete_cols_<T>(q_in, r_in, q_out, r_out, status, export, batch, m,
        // n, k0, p, team): the input holds batch·m·n and batch·n·n, the outputs
        // batch·m·(n−p) and batch·(n−p)², status batch (asserted); the outputs are distinct
        // mutable views aliasing no input; k0 + p ≤ n, 1 ≤ p < n ≤ 32, m ≥ n; grid
        // ⌈batch/(32/team)⌉, block 32 (team checked in grid()), shared memory
        // (32/team)·smem::delete_cols(m, n). `export` (a full-Q state's) holds batch·m·p
        // (asserted), another buffer; without it the pointer is null.
        unsafe {
            let null = 0u64;
            match export {
                Some(mut e) => launch_kernel!(self, f, cfg, "batch_q_delete_cols"; &input.q,
                    &input.r, &mut q_out, &mut r_out, &mut *status, &mut e, &batch, &m, &n,
                    &k0, &p, &team),
                None => launch_kernel!(self, f, cfg, "batch_q_delete_cols"; &input.q,
                    &input.r, &mut q_out, &mut r_out, &mut *status, &null, &batch, &m, &n,
                    &k0, &p, &team),
            }
        }?;
        Ok(())
    }

    /// Launches `batch_q_shift_col_<T>`: column `from` of Q₁ and R of `input` moved to
    /// position `to`, into `q_out` (batch·m·n) and `r_out` (batch·n²); b does not change.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    ///
    /// # Panics
    /// As [`Gpu::batch_q_factor`], and for n < 2, from ≥ n or to ≥ n.
    pub(crate) fn batch_q_shift_col<T: GpuScalar>(
        &self,
        shape: QShape,
        input: QView<'_, T>,
        (from, to): (usize, usize),
        (mut q_out, mut r_out): (CudaViewMut<'_, T>, CudaViewMut<'_, T>),
        status: &mut CudaSlice<u32>,
    ) -> Result<()> {
        let QShape { batch, m, n, team } = shape;
        shape.check(&input);
        assert!(n >= 2 && from < n && to < n);
        assert!(q_out.len() >= batch * m * n && r_out.len() >= batch * n * n);
        assert!(status.len() >= batch);
        if batch == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).batch_q_shift_col;
        let cfg = launch_config(
            shape.grid(),
            (32, 1),
            shape.smem_bytes::<T>(smem::shift_col(m, n)),
        );
        // SAFETY: matches batch_q_shift_col_<T>(q_in, r_in, q_out, r_out, status, batch, m,
        // n, from, to, team): the input holds batch·m·n and batch·n·n, the outputs the same,
        // status batch (asserted); the outputs are distinct mutable views aliasing no input;
        // 2 ≤ n ≤ 32, m ≥ n, from, to < n; grid ⌈batch/(32/team)⌉, block 32 (team checked
        // in grid()), shared memory (32/team)·smem::shift_col(m, n).
        unsafe {
            launch_kernel!(self, f, cfg, "batch_q_shift_col"; &input.q, &input.r,
                &mut q_out, &mut r_out, &mut *status, &batch, &m, &n, &from, &to, &team)
        }?;
        Ok(())
    }

    /// Launches `batch_q_refresh_<T>`: every problem's ‖Q₁ᵀQ₁ − I‖_F into `drift`, and
    /// the problems past `tol` refreshed in place (Q₁ = Q′R₂, Q₁ ← Q′, R ← R₂R).
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    ///
    /// # Panics
    /// As [`Gpu::batch_q_factor`].
    pub(crate) fn batch_q_refresh<T: GpuScalar>(
        &self,
        shape: QShape,
        (mut q, mut r): (CudaViewMut<'_, T>, CudaViewMut<'_, T>),
        tol: T,
        drift: &mut CudaSlice<T>,
        status: &mut CudaSlice<u32>,
        extra2: Option<CudaView<'_, T>>,
    ) -> Result<()> {
        let QShape { batch, m, n, team } = shape;
        assert!((1..=BATCH_Q_MAX_N).contains(&n) && m >= n);
        assert!(extra2.as_ref().is_none_or(|e| e.len() >= batch));
        assert!(q.len() >= batch * m * n && r.len() >= batch * n * n);
        assert!(drift.len() >= batch && status.len() >= batch);
        if batch == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).batch_q_refresh;
        let cfg = launch_config(
            shape.grid(),
            (32, 1),
            shape.smem_bytes::<T>(smem::refresh(m, n)),
        );
        // SAFETY: matches batch_q_refresh_<T>(q, r, drift, status, extra2, batch, m, n, tol, team):
        // q and r hold batch·m·n and batch·n·n (read and written in place, each problem by
        // its own team), drift and status batch (asserted), distinct buffers; 1 ≤ n ≤ 32,
        // m ≥ n; grid ⌈batch/(32/team)⌉, block 32 (team checked in grid()), shared memory
        // (32/team)·smem::refresh(m, n). `extra2` (a full-Q state's complement share)
        // holds batch (asserted); without it the pointer is null.
        unsafe {
            let null = 0u64;
            match extra2 {
                Some(e) => launch_kernel!(self, f, cfg, "batch_q_refresh"; &mut q, &mut r,
                    &mut *drift, &mut *status, &e, &batch, &m, &n, &tol, &team),
                None => launch_kernel!(self, f, cfg, "batch_q_refresh"; &mut q, &mut r,
                    &mut *drift, &mut *status, &null, &batch, &m, &n, &tol, &team),
            }
        }?;
        Ok(())
    }

    /// Launches `batch_q_insert_cols_<T>`: the p columns `cols` (batch·m·p, row-major a
    /// problem) in before column k0 of Q₁ and R of `input`, into `q_out` (batch·m·(n+p))
    /// and `r_out` (batch·(n+p)²); b does not change. `shape.team` ≥ n + p.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    ///
    /// # Panics
    /// As [`Gpu::batch_q_factor`], and for k0 > n, p = 0, n + p > team or m < n + p.
    pub(crate) fn batch_q_insert_cols<T: GpuScalar>(
        &self,
        shape: QShape,
        input: QView<'_, T>,
        (cols, k0, p): (CudaView<'_, T>, usize, usize),
        (mut q_out, mut r_out): (CudaViewMut<'_, T>, CudaViewMut<'_, T>),
        status: &mut CudaSlice<u32>,
        export: Option<CudaViewMut<'_, T>>,
    ) -> Result<()> {
        let QShape { batch, m, n, team } = shape;
        shape.check(&input);
        let np = n + p;
        assert!(export.as_ref().is_none_or(|e| e.len() >= batch * p * m));
        assert!(p >= 1 && k0 <= n && np <= team && m >= np);
        assert!(cols.len() >= batch * m * p);
        assert!(q_out.len() >= batch * m * np && r_out.len() >= batch * np * np);
        assert!(status.len() >= batch);
        if batch == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).batch_q_insert_cols;
        let cfg = launch_config(
            shape.grid(),
            (32, 1),
            shape.smem_bytes::<T>(smem::insert_cols(m, n, p)),
        );
        // SAFETY: matches batch_q_insert_cols_<T>(q_in, r_in, u, q_out, r_out, status, export, batch,
        // m, n, k0, p, team): the input holds batch·m·n and batch·n·n, the columns
        // batch·m·p, the outputs batch·m·(n+p) and batch·(n+p)², status batch (asserted);
        // the outputs are distinct mutable views aliasing no input; k0 ≤ n, p ≥ 1,
        // n + p ≤ team ≤ 32, m ≥ n + p; grid ⌈batch/(32/team)⌉, block 32 (team checked in
        // grid()), shared memory (32/team)·smem::insert_cols(m, n, p). `export` (a full-Q
        // state's) holds batch·p·m (asserted), another buffer; without it the pointer is
        // null.
        unsafe {
            let null = 0u64;
            match export {
                Some(mut e) => launch_kernel!(self, f, cfg, "batch_q_insert_cols"; &input.q,
                    &input.r, &cols, &mut q_out, &mut r_out, &mut *status, &mut e, &batch,
                    &m, &n, &k0, &p, &team),
                None => launch_kernel!(self, f, cfg, "batch_q_insert_cols"; &input.q,
                    &input.r, &cols, &mut q_out, &mut r_out, &mut *status, &null, &batch,
                    &m, &n, &k0, &p, &team),
            }
        }?;
        Ok(())
    }

    /// Launches `batch_q_solve_<T>`: x (batch·n), ‖b − Q₁d‖² (batch) and the statuses.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    ///
    /// # Panics
    /// As [`Gpu::batch_q_factor`].
    pub(crate) fn batch_q_solve<T: GpuScalar>(
        &self,
        shape: QShape,
        input: QView<'_, T>,
        (mut x, mut rss): (CudaViewMut<'_, T>, CudaViewMut<'_, T>),
        rank_tol: f64,
        status: &mut CudaSlice<u32>,
    ) -> Result<()> {
        let QShape { batch, m, n, team } = shape;
        shape.check(&input);
        assert!(x.len() >= batch * n && rss.len() >= batch && status.len() >= batch);
        if batch == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).batch_q_solve;
        let cfg = launch_config(shape.grid(), (32, 1), shape.smem_bytes::<T>(smem::solve(n)));
        // SAFETY: matches batch_q_solve_<T>(q, r, b, x, rss, status, batch, m, n,
        // rank_tol, team): the state holds batch·m·n, batch·n·n, batch·m, x batch·n, rss and
        // status batch (asserted); outputs distinct from the state; 1 ≤ n ≤ 32, m ≥ n;
        // grid ⌈batch/(32/team)⌉, block 32 (team checked in grid()), shared memory
        // (32/team)·smem::solve(n).
        unsafe {
            launch_kernel!(self, f, cfg, "batch_q_solve"; &input.q, &input.r, &input.b,
                &mut x, &mut rss, &mut *status, &batch, &m, &n, &rank_tol, &team)
        }?;
        Ok(())
    }

    /// Launches `batch_q_complement_<T>` (docs/algorithms.md#batched-full-q-states):
    /// operation `op` (gpu-kernels/src/batch_q/complement.rs) on every problem's Q₂ (m×c
    /// before the call) whose status is `want` (every problem without `status`), into
    /// `q2_out`; the others write `fallback` when given.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    ///
    /// # Panics
    /// On buffers shorter than the operation needs or sizes outside its contract (cuqr
    /// bugs: the caller validates).
    pub(crate) fn batch_q_complement<T: GpuScalar>(
        &self,
        (op, batch, (m, n, c), (k0, p)): ComplementOp,
        (q1, q2_in, mut q2_out): (
            Option<CudaView<'_, T>>,
            Option<CudaView<'_, T>>,
            CudaViewMut<'_, T>,
        ),
        (extra, fallback): (Option<CudaView<'_, T>>, Option<CudaView<'_, T>>),
        (status, want, e2): (Option<&CudaSlice<u32>>, u32, Option<&mut CudaSlice<T>>),
    ) -> Result<()> {
        use complement_op::*;
        let (mo, co) = complement_op::output(op, (m, c), p);
        assert!(op == MEASURE || q2_out.len() >= batch * mo * co);
        assert!(q1.as_ref().is_none_or(|v| v.len() >= batch * m * n));
        assert!(q2_in.as_ref().is_none_or(|v| v.len() >= batch * m * c));
        assert!(fallback.as_ref().is_none_or(|v| v.len() >= batch * mo * co));
        assert!(status.is_none_or(|v| v.len() >= batch));
        assert!(e2.as_ref().is_none_or(|v| v.len() >= batch));
        let need_extra = match op {
            REPLACE => batch * p * 2 * m,
            ADD_ROWS => batch * (m + p) * p,
            ADD_COLS | DROP_DIRS => batch * m * p,
            _ => 0,
        };
        assert!(extra
            .as_ref()
            .map_or(need_extra == 0, |v| v.len() >= need_extra));
        match op {
            BUILD => assert!(q1.is_some() && n <= m),
            MEASURE => assert!(q1.is_some() && q2_in.is_some() && n <= m),
            REPLACE => {}
            _ => assert!(q2_in.is_some()),
        }
        match op {
            DROP_ROWS => assert!(p <= c && p <= MAX_DROP && k0 + p <= m),
            DROP_DIRS => assert!(p <= c && p <= MAX_DROP),
            ADD_ROWS => assert!(k0 <= m),
            MEASURE => assert!(e2.is_some()),
            _ => {}
        }
        if batch == 0 {
            return Ok(());
        }
        let ks = T::kernel_set(&self.kernels);
        let f = match op {
            BUILD => &ks.batch_q_complement_build,
            REPLACE => &ks.batch_q_complement_replace,
            ADD_ROWS | ADD_COLS => &ks.batch_q_complement_add,
            DROP_ROWS | DROP_DIRS => &ks.batch_q_complement_drop,
            _ => &ks.batch_q_complement_measure,
        };
        let bytes = complement_op::smem(op, m, n, c, p) * size_of::<T>();
        assert!(
            bytes <= BATCH_Q_SMEM_LIMIT,
            "batch_q complement shared memory"
        );
        let grid = u32::try_from(batch).expect("batch fits a grid dimension");
        let cfg = launch_config((grid, 1), (32, 1), bytes);
        let null = 0u64;
        // SAFETY: matches batch_q_complement_<group>_<T>(op, q1, q2_in, q2_out, extra, fallback,
        // status, want, e2, batch, m, n, c, k0, p): every buffer given holds what the
        // operation reads or writes for batch problems (asserted above), the absent ones are
        // null (a u64 0) where the operation does not touch them (asserted by op); q2_out is
        // a mutable view distinct from every input (REPLACE works in place on it alone);
        // grid batch, block 32, shared memory smem(op, m, n, c, p) elements as the contract
        // says.
        unsafe {
            use cudarc::driver::PushKernelArg;
            let mut b = self.kernel_args(f);
            b.arg(&op);
            for v in [&q1, &q2_in] {
                match v {
                    Some(v) => b.arg(v),
                    None => b.arg(&null),
                };
            }
            b.arg(&mut q2_out);
            for v in [&extra, &fallback] {
                match v {
                    Some(v) => b.arg(v),
                    None => b.arg(&null),
                };
            }
            match status {
                Some(v) => b.arg(v),
                None => b.arg(&null),
            };
            b.arg(&want);
            let mut e2 = e2;
            match &mut e2 {
                Some(v) => b.arg(&mut **v),
                None => b.arg(&null),
            };
            b.arg(&batch).arg(&m).arg(&n).arg(&c).arg(&k0).arg(&p);
            crate::gpu::ffi::driver::fault::launch()
                .and_then(|()| b.launch(cfg))
                .map_err(crate::gpu::launch::launch_err("batch_q_complement"))?;
        }
        Ok(())
    }
}
