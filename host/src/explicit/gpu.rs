//! [`GpuExplicitQr`]: explicit factors with Q in device memory
//! (docs/algorithms.md#explicit-factors-on-the-gpu). The updates are those of
//! [`super::ExplicitQr`], step for step: R (small, and read entry by entry to choose each
//! rotation) stays on the host, Q (the large factor) on the device, where the rotations an
//! update chose are applied together by the rotation-chain kernel the next time Q is
//! read and at the end of every call; Qᴴu and u − Q·c are cuBLAS GEMVs.

use std::sync::Arc;

use crate::base::error::{Error, Result};
use crate::base::field::{from_parts, to_parts, Field};
use crate::base::rotation_chain::{encode, ChainRotation};
use crate::cpu::explicit::{Dense, Factors, QStore, Trapezoid};
use crate::gpu::runtime::{DevMat, DevVec, Gpu, GpuField};

use super::{updates, ExplicitQr};

/// Q (m×t) in device memory with spare rows and columns, and the rotations not yet
/// applied to it. Logical row i of Q lives in physical row `phys[i]` of the buffer:
/// inserting a row takes a free physical row and deleting one frees it (zeroed), so
/// neither moves Q. Free rows are zero, so products and rotations may run over every
/// physical row below `high` (the most ever in use).
#[derive(Debug)]
struct DeviceQ<T: GpuField> {
    gpu: Arc<Gpu>,
    t: usize,
    /// PARTS·(row capacity) rows of parts, ≥ t columns (the spare ones unused).
    buf: DevMat<T::Real>,
    phys: Vec<usize>,
    /// Free physical rows below `high` (zero in every column).
    free: Vec<usize>,
    /// Physical rows 0..high have been in use; the rows from `high` on are zero.
    high: usize,
    pending: Vec<ChainRotation<T>>,
}

impl<T: GpuField> DeviceQ<T> {
    /// Q of the column-major m×t `parts` already in `buf` (rows in order).
    fn in_order(gpu: &Arc<Gpu>, buf: DevMat<T::Real>, (m, t): (usize, usize)) -> Self {
        Self {
            gpu: Arc::clone(gpu),
            t,
            buf,
            phys: (0..m).collect(),
            free: Vec::new(),
            high: m,
            pending: Vec::new(),
        }
    }

    /// Q from column-major host elements (m×t), with room for more rows and columns.
    fn upload(gpu: &Arc<Gpu>, q: &[T], (m, t): (usize, usize)) -> Result<Self> {
        let mut buf = DevMat::zeros(gpu, T::PARTS * (m + m / 8 + 4), t + t / 8 + 4)?;
        gpu.write_block(&to_parts(q), &mut buf, (0, 0), (T::PARTS * m, t))?;
        Ok(Self::in_order(gpu, buf, (m, t)))
    }

    /// Applies the gathered rotations.
    fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let chain = encode(&self.pending);
        self.pending.clear();
        self.gpu
            .rotation_chain_apply(&mut self.buf, (self.high, self.t), &chain)
    }

    /// A logical vector (length m) in physical row order (length `high`, zero at free
    /// rows), as parts.
    fn scatter(&self, x: &[T]) -> Vec<T::Real> {
        let mut out = vec![T::zero(); self.high];
        for (&p, &v) in self.phys.iter().zip(x) {
            out[p] = v;
        }
        to_parts(&out)
    }

    /// The logical vector of a physical-order one.
    fn gather(&self, parts: &[T::Real]) -> Vec<T> {
        let y: Vec<T> = from_parts(parts);
        self.phys.iter().map(|&p| y[p]).collect()
    }

    /// Q as column-major host elements, rows in logical order.
    fn download(&mut self) -> Result<Vec<T>> {
        self.flush()?;
        let (p, m, t) = (T::PARTS, self.phys.len(), self.t);
        let parts = self.gpu.read_block(&self.buf, (0, 0), (p * self.high, t))?;
        let all: Vec<T> = from_parts(&parts);
        let mut out = Vec::with_capacity(m * t);
        for j in 0..t {
            out.extend(self.phys.iter().map(|&r| all[r + j * self.high]));
        }
        Ok(out)
    }

    /// Moves Q into a zeroed buffer of `rows` physical rows and `cols` columns, rows in
    /// logical order (free rows dropped).
    fn rebuild(&mut self, rows: usize, cols: usize) -> Result<()> {
        let q = self.download()?;
        let (m, t) = (self.phys.len(), self.t);
        let mut buf = DevMat::zeros(&self.gpu, T::PARTS * rows.max(m), cols.max(t))?;
        self.gpu
            .write_block(&to_parts(&q), &mut buf, (0, 0), (T::PARTS * m, t))?;
        *self = Self::in_order(&self.gpu, buf, (m, t));
        Ok(())
    }

    /// Moves Q into a zeroed buffer of `rows` physical rows and `cols` columns, rows where
    /// they are (a copy on the device).
    fn grow(&mut self, rows: usize, cols: usize) -> Result<()> {
        self.flush()?;
        let p = T::PARTS;
        let mut buf = DevMat::zeros(&self.gpu, p * rows.max(self.high), cols.max(self.t))?;
        self.gpu
            .copy_block(&self.buf, (0, 0), &mut buf, (0, 0), (p * self.high, self.t))?;
        self.buf = buf;
        Ok(())
    }

    /// Q in a new buffer of exactly PARTS·m rows and t columns, rows in logical order:
    /// one device copy per run of consecutive physical rows.
    fn ordered(&mut self) -> Result<DevMat<T::Real>> {
        self.flush()?;
        let (p, m, t) = (T::PARTS, self.phys.len(), self.t);
        let mut out = DevMat::zeros(&self.gpu, p * m, t)?;
        let mut i = 0;
        while i < m && t > 0 {
            let start = self.phys[i];
            let run = 1
                + (i + 1..m)
                    .take_while(|&l| self.phys[l] == start + (l - i))
                    .count();
            self.gpu.copy_block(
                &self.buf,
                (p * start, 0),
                &mut out,
                (p * i, 0),
                (p * run, t),
            )?;
            i += run;
        }
        Ok(out)
    }

    /// x (already parts) as a device vector.
    fn vector(&self, parts: &[T::Real]) -> Result<DevVec<T::Real>> {
        DevVec::from_slice(&self.gpu, parts)
    }
}

impl<T: GpuField> QStore<T> for DeviceQ<T> {
    fn rows(&self) -> usize {
        self.phys.len()
    }
    fn cols(&self) -> usize {
        self.t
    }
    fn rotate(&mut self, rot: ChainRotation<T>) -> Result<()> {
        self.pending.push(rot);
        Ok(())
    }
    fn adjoint_times(&mut self, x: &[T]) -> Result<Vec<T>> {
        self.flush()?;
        if self.high == 0 || self.t == 0 {
            return Ok(vec![T::zero(); self.t]);
        }
        let xd = self.vector(&self.scatter(x))?;
        let mut y = DevVec::zeros(&self.gpu, T::PARTS * self.t)?;
        let shape = (self.high, self.t, 0);
        self.gpu.gemv_field(
            true,
            shape,
            T::one(),
            &self.buf,
            &xd.view(),
            T::zero(),
            &mut y.view_mut(),
        )?;
        Ok(from_parts(&y.to_vec(&self.gpu)?))
    }
    fn sub_times(&mut self, c: &[T], y: &mut [T]) -> Result<()> {
        self.flush()?;
        if self.high == 0 || self.t == 0 {
            return Ok(());
        }
        let cd = self.vector(&to_parts(c))?;
        let mut yd = self.vector(&self.scatter(y))?;
        let shape = (self.high, self.t, 0);
        self.gpu.gemv_field(
            false,
            shape,
            -T::one(),
            &self.buf,
            &cd.view(),
            T::one(),
            &mut yd.view_mut(),
        )?;
        y.copy_from_slice(&self.gather(&yd.to_vec(&self.gpu)?));
        Ok(())
    }
    fn project_pass(&mut self, rest: &mut [T]) -> Result<Vec<T>> {
        self.flush()?;
        if self.high == 0 || self.t == 0 {
            return Ok(vec![T::zero(); self.t]);
        }
        let mut rd = self.vector(&self.scatter(rest))?;
        let mut c = DevVec::zeros(&self.gpu, T::PARTS * self.t)?;
        let shape = (self.high, self.t, 0);
        self.gpu.gemv_field(
            true,
            shape,
            T::one(),
            &self.buf,
            &rd.view(),
            T::zero(),
            &mut c.view_mut(),
        )?;
        self.gpu.gemv_field(
            false,
            shape,
            -T::one(),
            &self.buf,
            &c.view(),
            T::one(),
            &mut rd.view_mut(),
        )?;
        rest.copy_from_slice(&self.gather(&rd.to_vec(&self.gpu)?));
        Ok(from_parts(&c.to_vec(&self.gpu)?))
    }
    fn reflect_cols(&mut self, first: usize, v: &[T], tau: T::Real) -> Result<()> {
        self.flush()?;
        let n = self.t - first;
        if self.high == 0 || n == 0 {
            return Ok(());
        }
        let vd = self.vector(&to_parts(v))?;
        let mut z = DevVec::zeros(&self.gpu, T::PARTS * self.high)?;
        let shape = (self.high, n, first);
        self.gpu.gemv_field(
            false,
            shape,
            T::one(),
            &self.buf,
            &vd.view(),
            T::zero(),
            &mut z.view_mut(),
        )?;
        let alpha = -T::from_real(tau);
        self.gpu
            .gerc_field(shape, alpha, &z.view(), &vd.view(), &mut self.buf)
    }
    fn push_col(&mut self, col: &[T]) -> Result<()> {
        self.flush()?;
        if self.t == self.buf.ncols() {
            let rows = self.buf.nrows() / T::PARTS;
            self.grow(rows, self.t + self.t / 2 + 4)?;
        }
        let parts = self.scatter(col);
        let rows = T::PARTS * self.high;
        self.gpu
            .write_block(&parts, &mut self.buf, (0, self.t), (rows, 1))?;
        self.t += 1;
        Ok(())
    }
    fn pop_col(&mut self) -> Result<()> {
        self.flush()?;
        // the dropped column's contents stay: a later push rewrites rows 0..high, and no
        // row from `high` on is ever written
        self.t -= 1;
        Ok(())
    }
    fn insert_zero_row(&mut self, k: usize) -> Result<()> {
        self.flush()?;
        let p = match self.free.pop() {
            Some(p) => p,
            None => {
                if T::PARTS * (self.high + 1) > self.buf.nrows() {
                    self.grow(self.high + self.high / 2 + 4, self.buf.ncols())?;
                }
                self.high += 1;
                self.high - 1
            }
        };
        self.phys.insert(k, p);
        Ok(())
    }
    fn remove_row(&mut self, k: usize) -> Result<()> {
        self.flush()?;
        let p = self.phys.remove(k);
        self.gpu.zero_row_field::<T>(&mut self.buf, p, self.t)?;
        self.free.push(p);
        if self.high > 2 * self.phys.len() + 64 {
            let m = self.phys.len();
            self.rebuild(m + m / 8 + 4, self.buf.ncols())?;
        }
        Ok(())
    }
    fn row(&mut self, k: usize) -> Result<Vec<T>> {
        self.flush()?;
        let mut y = DevVec::zeros(&self.gpu, T::PARTS * self.t.max(1))?;
        self.gpu
            .read_row_field::<T>(&self.buf, self.phys[k], self.t, &mut y.view_mut())?;
        let mut v: Vec<T> = from_parts(&y.to_vec(&self.gpu)?);
        v.truncate(self.t);
        Ok(v)
    }
    fn row_norms(&mut self) -> Result<Vec<T::Real>> {
        // only the rare fallback of a row deletion (e_k in range(Q)) asks: read Q back
        let q = Dense::from_col_major(self.phys.len(), self.t, self.download()?);
        QStore::row_norms(&mut { q })
    }
    fn snapshot(&self) -> Result<Self> {
        Ok(Self {
            gpu: Arc::clone(&self.gpu),
            t: self.t,
            buf: self.buf.dup(&self.gpu)?,
            phys: self.phys.clone(),
            free: self.free.clone(),
            high: self.high,
            pending: self.pending.clone(),
        })
    }
}

/// A QR factorisation A = Q·R with explicit Q in device memory and R on the host, updated
/// as [`ExplicitQr`] is (f32, f64, [`c32`](super::c32), [`c64`](super::c64); tall, square
/// or wide; full or economic) with the rotations applied to Q on the GPU.
///
/// A refused update (out-of-range positions, wrong lengths, non-finite data, a
/// rank-deficient column of an economic factorisation, a row an economic Q cannot
/// lose) leaves the factors as they were. A device failure part way through an update
/// (an [`Error::Driver`], [`Error::Cublas`] or [`Error::OutOfMemory`]) leaves them
/// unusable: every later call returns [`Error::Poisoned`].
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use cuqr::explicit::{c64, GpuExplicitQr};
/// let gpu = Arc::new(cuqr::Gpu::new(0)?);
/// let (m, n) = (6, 3);
/// let a: Vec<c64> = (0..m * n).map(|e| c64::new(1.0 / (1.0 + e as f64), e as f64)).collect();
/// let mut qr = GpuExplicitQr::factorize(&gpu, &a, (m, n), true)?;
/// qr.rank_k(&vec![c64::new(1.0, 0.0); m], &vec![c64::new(0.0, 1.0); n], 1)?;
/// let (q, r) = qr.to_host()?.into_parts();
/// assert_eq!((q.len(), r.len()), (m * n, n * n));
/// # Ok::<(), cuqr::Error>(())
/// ```
#[derive(Debug)]
pub struct GpuExplicitQr<T: GpuField> {
    f: Factors<T, DeviceQ<T>>,
    /// Set by a device failure part way through an update.
    poisoned: bool,
}

impl<T: GpuField> GpuExplicitQr<T> {
    /// The factors of [`ExplicitQr::new`] (same arguments and errors) with Q uploaded to
    /// `gpu`.
    ///
    /// Errors: as [`ExplicitQr::new`]; [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn new(
        gpu: &Arc<Gpu>,
        q: &[T],
        q_shape: (usize, usize),
        r: &[T],
        r_shape: (usize, usize),
    ) -> Result<Self> {
        let host = ExplicitQr::new(q, q_shape, r, r_shape)?;
        Self::from_host(gpu, &host)
    }

    /// `host`'s factors with Q uploaded to `gpu`.
    ///
    /// Errors: [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn from_host(gpu: &Arc<Gpu>, host: &ExplicitQr<T>) -> Result<Self> {
        let (m, t) = host.q_shape();
        let (_, n) = host.r_shape();
        let q = DeviceQ::upload(gpu, host.q(), (m, t))?;
        Ok(Self {
            f: Factors {
                q,
                r: Trapezoid::from_col_major(t, n, &host.r()),
            },
            poisoned: false,
        })
    }

    /// The factors with Q already in device memory, taken over without a copy: `q` holds
    /// the column-major m×t Q in interleaved storage, [`Field::PARTS`]·m rows of real
    /// parts (for a complex `T`, row 2i the real parts of Q's row i and row 2i + 1 its
    /// imaginary parts: cuBLAS's layout of a complex matrix; for a real `T`, Q itself).
    /// R (`r_shape` = (t, n), column-major) stays on the host. Same shape rules as
    /// [`ExplicitQr::new`]; Q is scanned for non-finite entries on the device.
    ///
    /// Errors: [`Error::Shape`], [`Error::NonFinite`], [`Error::OutOfMemory`],
    /// [`Error::Driver`].
    pub fn from_device(
        gpu: &Arc<Gpu>,
        q: DevMat<T::Real>,
        q_shape: (usize, usize),
        r: &[T],
        r_shape: (usize, usize),
    ) -> Result<Self> {
        const OP: &str = "GpuExplicitQr::from_device";
        let (m, t) = q_shape;
        if q.nrows() != T::PARTS * m {
            return Err(Error::shape(
                OP,
                "Q's rows of parts",
                q.nrows(),
                T::PARTS * m,
            ));
        }
        if q.ncols() != t {
            return Err(Error::shape(OP, "Q's columns", q.ncols(), t));
        }
        super::check_shapes(OP, q_shape, r, r_shape)?;
        if let Some((row, col)) = gpu.first_non_finite(&q.view())? {
            return Err(Error::NonFinite {
                op: OP,
                what: "Q",
                row: row / T::PARTS,
                col,
            });
        }
        super::finite(OP, "R", r, t)?;
        Ok(Self {
            f: Factors {
                q: DeviceQ::in_order(gpu, q, q_shape),
                r: Trapezoid::from_col_major(t, r_shape.1, r),
            },
            poisoned: false,
        })
    }

    /// A copy of Q in device memory, in the interleaved storage of
    /// [`GpuExplicitQr::from_device`] (exactly [`Field::PARTS`]·m rows, rows in order; the
    /// copies are queued on [`Gpu::stream`]). The state keeps its own Q.
    ///
    /// Errors: [`Error::Poisoned`], [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn q_device(&mut self) -> Result<DevMat<T::Real>> {
        self.usable()?;
        self.f.q.ordered()
    }

    /// The factors, the state consumed: Q in device memory in the interleaved storage of
    /// [`GpuExplicitQr::from_device`] (exactly [`Field::PARTS`]·m rows, rows in order; the
    /// copies that put them there are queued on [`Gpu::stream`]), and R, column-major, on
    /// the host.
    ///
    /// Errors: [`Error::Poisoned`], [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn into_device(mut self) -> Result<(DevMat<T::Real>, Vec<T>)> {
        self.usable()?;
        let q = self.f.q.ordered()?;
        Ok((q, self.f.r.to_col_major()))
    }

    /// The QR factorisation of the column-major m×n `a` on `gpu` (cuSOLVER `geqrf` and
    /// `orgqr`/`ungqr`): economic (Q m×n, R n×n) when `economic` and m > n, else full
    /// (Q m×m, R m×n).
    ///
    /// Errors: [`Error::Shape`] when `a` is not m·n long, [`Error::NonFinite`],
    /// [`Error::OutOfMemory`], [`Error::Driver`], [`Error::Cusolver`].
    pub fn factorize(
        gpu: &Arc<Gpu>,
        a: &[T],
        (m, n): (usize, usize),
        economic: bool,
    ) -> Result<Self> {
        const OP: &str = "GpuExplicitQr::factorize";
        if a.len() != m * n {
            return Err(Error::shape(OP, "A's element count", a.len(), m * n));
        }
        finite_block(OP, a, m)?;
        let t = if economic && m > n { n } else { m };
        let p = T::PARTS;
        let kmin = m.min(n);
        // spare rows and columns for the updates that grow Q
        let mut buf = DevMat::zeros(gpu, p * (m + m / 8 + 4), n.max(t + t / 8 + 4))?;
        gpu.write_block(&to_parts(a), &mut buf, (0, 0), (p * m, n))?;
        let mut tau = DevVec::zeros(gpu, p * kmin.max(1))?;
        gpu.geqrf_field::<T>(&mut buf, (m, n), &mut tau.view_mut())?;
        let top = from_parts::<T>(&gpu.read_block(&buf, (0, 0), (p * t.min(m), n))?);
        let mut r = vec![T::zero(); t * n];
        for j in 0..n {
            for i in 0..=j.min(t.saturating_sub(1)) {
                if i < t {
                    r[i + j * t] = top[i + j * t];
                }
            }
        }
        gpu.ungqr_field::<T>(&mut buf, (m, t, kmin.min(t)), &tau.view())?;
        Ok(Self {
            f: Factors {
                q: DeviceQ::in_order(gpu, buf, (m, t)),
                r: Trapezoid::from_col_major(t, n, &r),
            },
            poisoned: false,
        })
    }

    /// Q's shape (m, t).
    pub fn q_shape(&self) -> (usize, usize) {
        (self.f.q.phys.len(), self.f.q.t)
    }
    /// R's shape (t, n).
    pub fn r_shape(&self) -> (usize, usize) {
        (self.f.r.rows(), self.f.r.cols())
    }
    /// Whether Q is economic (fewer columns than rows).
    pub fn is_economic(&self) -> bool {
        self.f.economic()
    }
    /// R, column-major (held on the host).
    pub fn r(&self) -> Vec<T> {
        self.f.r.to_col_major()
    }
    /// Q, column-major, read back from the device.
    ///
    /// Errors: [`Error::Driver`]; [`Error::Poisoned`].
    pub fn q(&mut self) -> Result<Vec<T>> {
        self.usable()?;
        self.f.q.download()
    }
    /// Both factors on the host, as an [`ExplicitQr`].
    ///
    /// Errors: as [`GpuExplicitQr::q`].
    pub fn to_host(&mut self) -> Result<ExplicitQr<T>> {
        let q = self.q()?;
        ExplicitQr::new(&q, self.q_shape(), &self.r(), self.r_shape())
    }

    /// As [`ExplicitQr::insert_rows`].
    ///
    /// Errors: as there, and [`Error::Driver`], [`Error::OutOfMemory`].
    pub fn insert_rows(&mut self, k: usize, rows: &[T], p: usize) -> Result<()> {
        const OP: &str = "GpuExplicitQr::insert_rows";
        self.run(|f| updates::insert_rows(OP, f, k, rows, p))
    }
    /// As [`ExplicitQr::delete_rows`].
    ///
    /// Errors: as there, and [`Error::Driver`], [`Error::OutOfMemory`].
    pub fn delete_rows(&mut self, k: usize, p: usize) -> Result<()> {
        const OP: &str = "GpuExplicitQr::delete_rows";
        self.run(|f| updates::delete_rows(OP, f, k, p))
    }
    /// As [`ExplicitQr::insert_cols`].
    ///
    /// Errors: as there, and [`Error::Driver`], [`Error::OutOfMemory`].
    pub fn insert_cols(
        &mut self,
        k: usize,
        cols: &[T],
        p: usize,
        rcond: Option<f64>,
    ) -> Result<()> {
        const OP: &str = "GpuExplicitQr::insert_cols";
        self.run(|f| updates::insert_cols(OP, f, k, cols, p, rcond))
    }
    /// As [`ExplicitQr::delete_cols`].
    ///
    /// Errors: as there, and [`Error::Driver`], [`Error::OutOfMemory`].
    pub fn delete_cols(&mut self, k: usize, p: usize) -> Result<()> {
        const OP: &str = "GpuExplicitQr::delete_cols";
        self.run(|f| updates::delete_cols(OP, f, k, p))
    }
    /// As [`ExplicitQr::rank_k`].
    ///
    /// Errors: as there, and [`Error::Driver`], [`Error::OutOfMemory`].
    pub fn rank_k(&mut self, u: &[T], v: &[T], p: usize) -> Result<()> {
        const OP: &str = "GpuExplicitQr::rank_k";
        self.run(|f| updates::rank_k(OP, f, u, v, p))
    }

    /// Runs `update`, then applies its last rotations to Q; a device failure marks the
    /// state broken (a refusal leaves it as it was, which `update` ensures).
    fn run(
        &mut self,
        update: impl FnOnce(&mut Factors<T, DeviceQ<T>>) -> Result<()>,
    ) -> Result<()> {
        self.usable()?;
        let out = update(&mut self.f).and_then(|()| self.f.q.flush());
        if let Err(e) = &out {
            if matches!(
                e,
                Error::Driver(_)
                    | Error::OutOfMemory { .. }
                    | Error::Cublas(_)
                    | Error::Cusolver(_)
            ) {
                self.poisoned = true;
            } else {
                // a refusal: nothing was applied, and nothing may stay queued either
                self.f.q.pending.clear();
            }
        }
        out
    }

    /// `Err` once a device failure has left the state unusable.
    fn usable(&self) -> Result<()> {
        if self.poisoned {
            Err(Error::Poisoned)
        } else {
            Ok(())
        }
    }
}

/// `Err` at the first non-finite entry of the column-major `a` with `rows` rows.
fn finite_block<T: Field>(op: &'static str, a: &[T], rows: usize) -> Result<()> {
    super::finite(op, "A", a, rows)
}
