//! Typed launcher of the rotation-chain kernel (gpu-kernels/src/rotation_chain.rs;
//! docs/algorithms.md#rotation-chains-on-the-gpu): an encoded rotation sequence applied
//! to the columns of Q, real or complex. The launch goes on [`Gpu::stream`] and counts
//! itself.

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DevicePtrMut};

use crate::base::error::{Error, Result};
use crate::base::field::{to_parts, Field};
use crate::base::rotation_chain::{EncodedChain, COL_MASK};
use crate::gpu::launch::{grid_blocks, launch_config, launch_kernel};
use crate::gpu::runtime::{driver_err, DevMat, Gpu, GpuField, GpuScalar};

/// Threads (rows of Q) per block: small blocks spread the m threads of a tall Q over
/// more multiprocessors.
const BLOCK: u32 = 64;

impl Gpu {
    /// Q ← Q·G₁ᴴ·G₂ᴴ⋯ for the rotations of `chain`, Q the m×`cols` element matrix held in
    /// the leading block of `q` (parts layout).
    ///
    /// # Errors
    /// [`Error::Shape`] when Q is smaller than the chain's columns need;
    /// [`Error::Driver`] for a failed upload or launch.
    pub(crate) fn rotation_chain_apply<T: GpuField>(
        &self,
        q: &mut DevMat<T::Real>,
        (m, cols): (usize, usize),
        chain: &EncodedChain<T>,
    ) -> Result<()> {
        let s = to_parts(&chain.s);
        let kernel = T::rotation_chain_kernel(&self.kernels);
        self.launch_rotation_chain(q, (m, cols, T::PARTS), (chain, &chain.c, &s), kernel)
    }

    /// [`Gpu::rotation_chain_apply`] for a real Q of either precision: the chain is made
    /// in f64 and its cosines and sines are rounded to T.
    ///
    /// # Errors
    /// As [`Gpu::rotation_chain_apply`].
    pub(crate) fn rotation_chain_apply_real<T: GpuScalar>(
        &self,
        q: &mut DevMat<T>,
        (m, cols): (usize, usize),
        chain: &EncodedChain<f64>,
    ) -> Result<()> {
        let c: Vec<T> = chain.c.iter().map(|&x| T::from_f64(x)).collect();
        let s: Vec<T> = chain.s.iter().map(|&x| T::from_f64(x)).collect();
        let kernel = &T::kernel_set(&self.kernels).rotation_chain_apply;
        self.launch_rotation_chain(q, (m, cols, 1), (chain, &c, &s), kernel)
    }

    /// The launch behind both: `c` and `s` are the chain's cosines and sines (s in parts)
    /// in the element type R of Q's parts, `parts` parts an element.
    fn launch_rotation_chain<R: GpuScalar, T: Field>(
        &self,
        q: &mut DevMat<R>,
        (m, cols, parts): (usize, usize, usize),
        (chain, c, s): (&EncodedChain<T>, &[R], &[R]),
        f: &CudaFunction,
    ) -> Result<()> {
        const OP: &str = "rotation_chain_apply";
        if chain.is_empty() || m == 0 {
            return Ok(());
        }
        if q.nrows() < parts * m || q.ncols() < cols || !q.ld().is_multiple_of(parts) {
            return Err(Error::shape(OP, "Q's parts block", q.nrows(), parts * m));
        }
        let nseg = chain.segments();
        let widest = chain
            .ops
            .iter()
            .map(|&op| op & COL_MASK)
            .chain((0..nseg).map(|g| chain.segs[2 * g + 1]))
            .max()
            .unwrap_or(0) as usize;
        if widest >= cols || chain.segs.len() != 2 * nseg + 1 {
            return Err(Error::shape(
                OP,
                "columns the chain names",
                widest + 1,
                cols,
            ));
        }
        let ops: CudaSlice<u32> = self.upload(&chain.ops)?;
        let c: CudaSlice<R> = self.upload(c)?;
        let s: CudaSlice<R> = self.upload(s)?;
        let segs: CudaSlice<u32> = self.upload(&chain.segs)?;
        let ldq = q.ld() / parts;
        let cfg = launch_config((grid_blocks(m, BLOCK), 1), (BLOCK, 1), 0);
        let (pq, _gq) = q.buf_mut().device_ptr_mut(&self.stream);
        let (po, _go) = ops.device_ptr(&self.stream);
        let (pc, _gc) = c.device_ptr(&self.stream);
        let (ps, _gs) = s.device_ptr(&self.stream);
        let (pg, _gg) = segs.device_ptr(&self.stream);
        // SAFETY: rotation_chain_apply_<T>(q, ldq, rows, ops, c, s, segs, nseg): `q` holds m
        // rows (parts·m parts, ld even in parts, so ldq elements) of ≥ cols columns and every
        // column an op or seed names is < cols (checked above); ops, c and s hold
        // segs[2·nseg] = chain.len() entries (s in parts: `parts` a sine) and segs
        // 2·nseg + 1 (checked); `f` is the kernel of Q's element type (the callers'
        // `rotation_chain_kernel` or `kernel_set`); the encoding is `encode`'s (an
        // EncodedChain is only made there); one thread per row.
        unsafe {
            launch_kernel!(self, f, cfg, OP;
                &pq, &ldq, &m, &po, &pc, &ps, &pg, &nseg)?;
        }
        Ok(())
    }

    /// `x` in a fresh device buffer on [`Gpu::stream`].
    fn upload<P: cudarc::driver::DeviceRepr + Copy>(&self, x: &[P]) -> Result<CudaSlice<P>> {
        self.count_launch();
        self.stream
            .clone_htod(x)
            .map_err(driver_err("uploading a rotation chain"))
    }
}
