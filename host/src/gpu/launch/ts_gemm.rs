//! Launchers of `ts_gemm_partial` and `ts_gemm_reduce` (gpu-kernels/src/ts_gemm.rs):
//! W = VᵀC for a tall V of at most 32 columns and a tall C, the first product
//! of the tall-skinny trailing update, as per-chunk partial products (4096 rows a block,
//! 64 columns of C a block) summed in chunk order. `householder::larfb_left` takes it in
//! f32 for tall panels, where cuBLAS's single GEMM of this shape reads its operands at
//! 1.2 TB/s on an H100 (docs/performance.md).

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{DevicePtr, LaunchConfig};

use crate::base::error::Result;
use crate::gpu::launch::launch_kernel;
use crate::gpu::runtime::matrix::{DevMatView, DevMatViewMut, DevVec};
use crate::gpu::runtime::{driver_err, Gpu, GpuScalar};

/// Rows of a block's chunk (`ts_gemm::CHUNK`).
const CHUNK: usize = 4096;
/// Columns of C a block covers (`ts_gemm::TN`).
const TN: usize = 64;
/// Widest V (`ts_gemm::TK`).
pub(crate) const TS_GEMM_MAX_K: usize = 32;
/// Threads of a block (`ts_gemm::THREADS`).
const THREADS: u32 = 256;
/// `ts_gemm::SMEM`, elements: two stages of (32 + 64) columns of 68 rows.
const SMEM: usize = 2 * (TS_GEMM_MAX_K + TN) * 68;

/// Whether a view's first element and its columns are 16-byte aligned (the kernel's
/// `cp.async` copies move 16 bytes).
fn aligned16<T: GpuScalar>(gpu: &Gpu, m: &DevMatView<'_, T>) -> bool {
    let elem = core::mem::size_of::<T>();
    let (ptr, _guard) = m.buf().device_ptr(&gpu.stream);
    ptr.is_multiple_of(16) && (m.ld() * elem).is_multiple_of(16)
}

impl Gpu {
    /// Whether [`Gpu::ts_gemm_tn`] takes W = VᵀC for these operands: V has 1 to 32
    /// columns, both have the same (at least one) rows, and both are 16-byte aligned
    /// with 16-byte multiples as leading dimensions.
    pub(crate) fn ts_gemm_fits<T: GpuScalar>(
        &self,
        v: &DevMatView<'_, T>,
        c: &DevMatView<'_, T>,
    ) -> bool {
        (1..=TS_GEMM_MAX_K).contains(&v.ncols())
            && v.nrows() == c.nrows()
            && v.nrows() > 0
            && aligned16(self, v)
            && aligned16(self, c)
    }

    /// W := VᵀC (k×nc, k = V's columns) by `ts_gemm_partial` over chunks of 4096 rows and
    /// `ts_gemm_reduce` (the partials summed in chunk order: the same result every run).
    /// Two launches and a scratch of ⌈rows/4096⌉·32·nc elements.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    ///
    /// # Panics
    /// If the operands do not pass [`Gpu::ts_gemm_fits`] or W is not k×nc (a cuqr bug).
    pub(crate) fn ts_gemm_tn<T: GpuScalar>(
        &self,
        v: &DevMatView<'_, T>,
        c: &DevMatView<'_, T>,
        w: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        assert!(
            self.ts_gemm_fits(v, c),
            "ts_gemm_tn: operands it does not take"
        );
        let (rows, k, nc) = (v.nrows(), v.ncols(), c.ncols());
        assert!(w.nrows() == k && w.ncols() == nc);
        if nc == 0 {
            return Ok(());
        }
        let chunks = rows.div_ceil(CHUNK);
        let tiles = nc.div_ceil(TN);
        let ks = T::kernel_set(&self.kernels);
        let elem = core::mem::size_of::<T>();
        let smem = SMEM * elem;
        ks.ts_gemm_partial
            .set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                i32::try_from(smem).expect("shared memory fits i32"),
            )
            .map_err(driver_err("raising ts_gemm_partial's shared memory limit"))?;
        let mut part = DevVec::<T>::uninit(self, chunks * TS_GEMM_MAX_K * nc)?;
        let (ldv, ldc, ldw) = (v.ld(), c.ld(), w.ld());
        assert!(tiles <= 65_535);
        let mut part_w = part.view_mut();
        let config = LaunchConfig {
            grid_dim: (
                u32::try_from(chunks).expect("chunks fit u32"),
                u32::try_from(tiles).expect("tiles fit u32"),
                1,
            ),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: u32::try_from(smem).expect("fits u32"),
        };
        // SAFETY: matches ts_gemm_partial_{f32,f64}(v: *const T, ldv, c: *const T, ldc,
        // rows, k, nc, part: *mut T): grid (⌈rows/4096⌉, ⌈nc/64⌉) with tiles ≤ 65535
        // (asserted above), block 256, SMEM elements (limit raised above); V (rows×k,
        // 1 ≤ k ≤ 32) and C (rows×nc) inside their views and 16-byte aligned
        // (ts_gemm_fits, asserted); part has chunks·32·nc elements and is a fresh buffer.
        unsafe {
            launch_kernel!(self, &ks.ts_gemm_partial, config, "ts_gemm_partial"; v.buf(),
                &ldv, c.buf(), &ldc, &rows, &k, &nc, &mut part_w)
        }?;
        let part_r = part.view();
        let grid = (TS_GEMM_MAX_K * nc).div_ceil(THREADS as usize);
        let config = LaunchConfig {
            grid_dim: (u32::try_from(grid).expect("grid fits u32"), 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches ts_gemm_reduce_{f32,f64}(part: *const T, chunks, k, nc,
        // w: *mut T, ldw): grid ⌈32·nc/256⌉, block 256; part holds chunks·32·nc
        // elements written above (same stream); W is k×nc (asserted) with ld ≥ k, a
        // &mut view that aliases neither part nor the operands.
        unsafe {
            launch_kernel!(self, &ks.ts_gemm_reduce, config, "ts_gemm_reduce"; &part_r,
                &chunks, &k, &nc, w.buf_mut(), &ldw)
        }?;
        Ok(())
    }
}

/// Rows of a narrow block's chunk (`ts_gemm::NARROW_CHUNK`).
const NARROW_CHUNK: usize = 256 * 64;
/// Columns of A and of B a narrow block covers (`ts_gemm::NARROW_TILE`), and for B of 5
/// to 8 columns (`ts_gemm::NARROW_TILE_WIDE`).
const NARROW_TILE: (usize, usize) = (8, 4);
const NARROW_TILE_WIDE: (usize, usize) = (4, 8);
/// The most chunks (grid y) of a narrow product: 65,535 of 16,384 rows.
pub(crate) const TS_GEMM_NARROW_MAX_ROWS: usize = 65_535 * NARROW_CHUNK;
/// The widest B that [`Gpu::ts_gemm_narrow_tn`] takes: each group of 4 of B's columns
/// reads A once more.
pub(crate) const TS_GEMM_NARROW_MAX: usize = 8;

impl Gpu {
    /// W := AᵀB (ka×kb) for a tall A (rows×ka, rows ≤ [`TS_GEMM_NARROW_MAX_ROWS`]) and a
    /// narrow B (rows×kb, 1 ≤ kb ≤ [`TS_GEMM_NARROW_MAX`]): `ts_gemm_narrow_partial` over
    /// chunks of 16,384 rows, one block a chunk and a tile of 8 of A's columns by 4 of B's
    /// (`ts_gemm_narrow_partial_wide`, 4 by 8, where kb > 4), each reading its columns
    /// straight from global memory, and `ts_gemm_narrow_reduce` summing the partials in
    /// chunk order (the same result every run). Reads A once at the copy rate
    /// where cuBLAS's GEMV and GEMM of this shape (a few outputs, an inner dimension of
    /// millions) run on a few multiprocessors (docs/performance.md#tall-updates). Two
    /// launches and a scratch of ⌈rows/16384⌉·ka·kb elements.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    ///
    /// # Panics
    /// If the row counts differ, are 0 or above [`TS_GEMM_NARROW_MAX_ROWS`], kb is 0 or
    /// above [`TS_GEMM_NARROW_MAX`], or W is not ka×kb (a cuqr bug).
    pub(crate) fn ts_gemm_narrow_tn<T: GpuScalar>(
        &self,
        a: &DevMatView<'_, T>,
        b: &DevMatView<'_, T>,
        w: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        let (rows, ka, kb) = (a.nrows(), a.ncols(), b.ncols());
        assert!(b.nrows() == rows && (1..=TS_GEMM_NARROW_MAX_ROWS).contains(&rows));
        assert!((1..=TS_GEMM_NARROW_MAX).contains(&kb));
        assert!(w.nrows() == ka && w.ncols() == kb);
        if ka == 0 {
            return Ok(());
        }
        let chunks = rows.div_ceil(NARROW_CHUNK);
        let ks = T::kernel_set(&self.kernels);
        let (tile, kernel, name) = if kb <= NARROW_TILE.1 {
            (
                NARROW_TILE,
                &ks.ts_gemm_narrow_partial,
                "ts_gemm_narrow_partial",
            )
        } else {
            (
                NARROW_TILE_WIDE,
                &ks.ts_gemm_narrow_partial_wide,
                "ts_gemm_narrow_partial_wide",
            )
        };
        let tiles = ka.div_ceil(tile.0) * kb.div_ceil(tile.1);
        let elem = core::mem::size_of::<T>();
        let mut part = DevVec::<T>::uninit(self, chunks * ka * kb)?;
        let (lda, ldb, ldw) = (a.ld(), b.ld(), w.ld());
        let mut part_w = part.view_mut();
        let config = LaunchConfig {
            grid_dim: (
                u32::try_from(tiles).expect("tiles fit u32"),
                u32::try_from(chunks).expect("chunks ≤ 65535 (asserted)"),
                1,
            ),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: u32::try_from(THREADS as usize * elem).expect("fits u32"),
        };
        // SAFETY: matches ts_gemm_narrow_partial{,_wide}_{f32,f64}(a: *const T, lda,
        // b: *const T, ldb, rows, ka, kb, part: *mut T): grid (⌈ka/TA⌉·⌈kb/TB⌉,
        // ⌈rows/16384⌉) for the kernel's tile (TA, TB), the chunks ≤ 65535 (asserted), block
        // 256, 256 elements of shared memory; A (rows×ka) and B (rows×kb) are the views'
        // extents with their leading dimensions; part has chunks·ka·kb elements and is a
        // fresh buffer.
        unsafe {
            launch_kernel!(self, kernel, config, name;
                a.buf(), &lda, b.buf(), &ldb, &rows, &ka, &kb, &mut part_w)
        }?;
        let part_r = part.view();
        let grid = (ka * kb).div_ceil(THREADS as usize);
        let config = LaunchConfig {
            grid_dim: (u32::try_from(grid).expect("grid fits u32"), 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches ts_gemm_narrow_reduce_{f32,f64}(part: *const T, chunks, ka, kb,
        // w: *mut T, ldw): grid ⌈ka·kb/256⌉, block 256; part holds chunks·ka·kb elements
        // written above (same stream); W is ka×kb (asserted) with ld ≥ ka, a &mut view
        // that aliases neither part nor the operands.
        unsafe {
            launch_kernel!(self, &ks.ts_gemm_narrow_reduce, config, "ts_gemm_narrow_reduce";
                &part_r, &chunks, &ka, &kb, w.buf_mut(), &ldw)
        }?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! `ts_gemm_tn` against W = VᵀC in f64 on the CPU: ragged row counts (a short last
    //! stage and a short last chunk), k < 32, column counts that leave a partial tile,
    //! poisoned outputs, within (4096 + chunks + 2)·u·(|V|ᵀ|C|) entry by entry (each
    //! thread sums its chunk's rows in order, then the chunks are summed in order).
    use super::*;
    use crate::gpu::algo::householder::tests_gate;
    use crate::gpu::runtime::DevMat;
    use crate::{Mat, Scalar};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn rand_mat<T: Scalar>(rng: &mut StdRng, m: usize, n: usize) -> Mat<T> {
        Mat::from_fn(m, n, |_, _| {
            let x: f64 = rng.random_range(0.1..1.0);
            T::from_f64(if rng.random_bool(0.5) { x } else { -x })
        })
    }

    fn case<T: GpuScalar>(g: &Gpu, seed: u64, rows: usize, k: usize, nc: usize) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (vh, ch) = (
            rand_mat::<T>(&mut rng, rows, k),
            rand_mat::<T>(&mut rng, rows, nc),
        );
        let v = DevMat::from_host(g, vh.as_ref()).unwrap();
        let c = DevMat::from_host(g, ch.as_ref()).unwrap();
        let mut w = DevMat::<T>::zeros(g, k, nc).unwrap();
        w.fill(g, T::from_f64(f64::NAN)).unwrap();
        assert!(
            g.ts_gemm_fits(&v.view(), &c.view()),
            "DevMat's padded ld is aligned"
        );
        g.ts_gemm_tn(&v.view(), &c.view(), &mut w.view_mut())
            .unwrap();
        let wh = w.to_host(g).unwrap();
        let chunks = rows.div_ceil(CHUNK) as f64;
        let gamma = (CHUNK as f64 + chunks + 2.0) * T::UNIT_ROUNDOFF;
        for j in 0..nc {
            for i in 0..k {
                let (mut exact, mut abs) = (0.0f64, 0.0f64);
                for r in 0..rows {
                    let (a, b) = (vh[(r, i)].to_f64(), ch[(r, j)].to_f64());
                    exact += a * b;
                    abs += (a * b).abs();
                }
                let got = wh[(i, j)].to_f64();
                assert!(
                    (got - exact).abs() <= gamma * abs,
                    "{} rows {rows} k {k} nc {nc}: W[{i}][{j}] = {got}, expected {exact} \
                     (bound {})",
                    T::NAME,
                    gamma * abs
                );
            }
        }
    }

    #[test]
    fn chunked_products_match_the_cpu() {
        let Some(g) = tests_gate() else { return };
        for (s, &(rows, k, nc)) in [
            (1, 32, 1),
            (70, 1, 3),
            (4096 * 3 + 77, 32, 96),
            (5000, 13, 7),
            (320, 5, 130),
            (8192, 32, 64),
            (20001, 31, 65),
        ]
        .iter()
        .enumerate()
        {
            case::<f32>(&g, 10 + s as u64, rows, k, nc);
            case::<f64>(&g, 20 + s as u64, rows, k, nc);
        }
    }

    /// `ts_gemm_narrow_tn` on blocks of NaN-framed matrices (any offset and leading
    /// dimension; a read outside the block shows as NaN), W poisoned, against AᵀB in f64
    /// within (64 + 5 + 8 + chunks + 2)·u·(|A|ᵀ|B|) entry by entry (each thread sums its
    /// 64 rows in order, a 5-level warp tree, the 8 warps and the chunks in order).
    fn narrow_case<T: GpuScalar>(g: &Gpu, seed: u64, rows: usize, ka: usize, kb: usize) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (ah, bh) = (
            rand_mat::<T>(&mut rng, rows, ka),
            rand_mat::<T>(&mut rng, rows, kb),
        );
        let nan = T::from_f64(f64::NAN);
        let framed = |x: &Mat<T>| {
            Mat::from_fn(x.nrows() + 3, x.ncols() + 2, |i, j| {
                if (1..=x.nrows()).contains(&i) && (2..x.ncols() + 2).contains(&j) {
                    x[(i - 1, j - 2)]
                } else {
                    nan
                }
            })
        };
        let a = DevMat::from_host(g, framed(&ah).as_ref()).unwrap();
        let b = DevMat::from_host(g, framed(&bh).as_ref()).unwrap();
        let mut w = DevMat::<T>::zeros(g, ka + 1, kb).unwrap();
        w.fill(g, nan).unwrap();
        g.ts_gemm_narrow_tn(
            &a.block(1, 2, rows, ka),
            &b.block(1, 2, rows, kb),
            &mut w.block_mut(0, 0, ka, kb),
        )
        .unwrap();
        let wh = w.to_host(g).unwrap();
        let chunks = rows.div_ceil(NARROW_CHUNK) as f64;
        let gamma = (64.0 + 5.0 + 8.0 + chunks + 2.0) * T::UNIT_ROUNDOFF;
        for j in 0..kb {
            assert!(wh[(ka, j)].to_f64().is_nan(), "row ka of W written");
            for i in 0..ka {
                let (mut exact, mut abs) = (0.0f64, 0.0f64);
                for r in 0..rows {
                    let (x, y) = (ah[(r, i)].to_f64(), bh[(r, j)].to_f64());
                    exact += x * y;
                    abs += (x * y).abs();
                }
                let got = wh[(i, j)].to_f64();
                assert!(
                    (got - exact).abs() <= gamma * abs,
                    "{} rows {rows} ka {ka} kb {kb}: W[{i}][{j}] = {got}, expected {exact} \
                     (bound {})",
                    T::NAME,
                    gamma * abs
                );
            }
        }
    }

    #[test]
    fn narrow_products_match_the_cpu() {
        let Some(g) = tests_gate() else { return };
        for (s, &(rows, ka, kb)) in [
            (1, 1, 1),
            (31, 8, 4),
            (NARROW_CHUNK, 8, 4),
            (NARROW_CHUNK + 1, 9, 5),
            (3 * NARROW_CHUNK + 77, 37, 1),
            (50_001, 3, 8),
            (20_000, 64, 2),
            (70_001, 130, 7),
        ]
        .iter()
        .enumerate()
        {
            narrow_case::<f32>(&g, 40 + s as u64, rows, ka, kb);
            narrow_case::<f64>(&g, 60 + s as u64, rows, ka, kb);
        }
    }

    #[test]
    fn misaligned_operands_are_refused() {
        let Some(g) = tests_gate() else { return };
        let mut rng = StdRng::seed_from_u64(3);
        let v = DevMat::from_host(&g, rand_mat::<f32>(&mut rng, 100, 4).as_ref()).unwrap();
        let c = DevMat::from_host(&g, rand_mat::<f32>(&mut rng, 100, 3).as_ref()).unwrap();
        // A view starting one row down is 4 bytes off 16-byte alignment.
        assert!(!g.ts_gemm_fits(&v.block(1, 0, 99, 4), &c.block(1, 0, 99, 3)));
        assert!(
            !g.ts_gemm_fits(&v.view(), &c.block(0, 0, 99, 3)),
            "row counts differ"
        );
        assert!(g.ts_gemm_fits(&v.view(), &c.view()));
    }
}
