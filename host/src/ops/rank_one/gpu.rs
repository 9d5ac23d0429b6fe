//! The GPU path: validation, the choice of path by the state's kind and the swap; the
//! algorithm is `gpu/algo/rank_one.rs`.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::gpu::algo::rank_one::{self as algo, RankOneInputs, RankOneUpdated};
use crate::gpu::runtime::{DevMatView, GpuScalar};
use crate::state::gpu::GpuQr;

/// Replaces A by A + u vᵀ on the device (docs/algorithms.md#rank-one-update; docs/design.md):
/// the full kind by [`algo::full`] (w = Qᵀu, stages A and B on copies of R, Q and d), the
/// thin kind by [`algo::thin_small_side`] (or [`algo::thin_projected`] where u lies mostly
/// in range(Q₁)), the R-only kind with kept data by [`algo::r_only`]; the rank check, and
/// the swap. R keeps exact zeros below its diagonal.
///
/// # Errors
/// Those of `plan` (above), [`Error::RankDeficient`], [`Error::OutOfMemory`], and device
/// errors. On error the state is unchanged (a device fault also poisons it).
pub fn run_gpu<T: GpuScalar>(st: &mut GpuQr<T>, u: &[T], v: &[T]) -> Result<()> {
    plan(st.dims, u, v)?;
    check_kind(st)?;
    // ‖u‖₂ summed in f64 (scaled where the plain sum overflows)
    let sum: f64 = u.iter().map(|x| x.to_f64() * x.to_f64()).sum();
    let unorm = if sum.is_finite() {
        sum.sqrt()
    } else {
        crate::cpu::householder::nrm2(u).to_f64()
    };
    let x = st.guarded(|| RankOneInputs::from_host(&st.gpu, u, v, unorm))?;
    run_gpu_inputs(st, x)
}

/// [`run_gpu`] with u (m×1) and v (n×1) already on the device (`GpuQr::rank_one_device`):
/// the same update without their upload. The non-finite checks run on the device
/// (`Gpu::first_non_finite`); u and v are copied into buffers of the update's own.
///
/// # Errors
/// As [`run_gpu`].
pub fn run_gpu_device<T: GpuScalar>(
    st: &mut GpuQr<T>,
    u: &DevMatView<'_, T>,
    v: &DevMatView<'_, T>,
) -> Result<()> {
    plan_shape(st.dims, (u.nrows(), u.ncols()), (v.nrows(), v.ncols()))?;
    check_kind(st)?;
    for (what, x) in [("u", u), ("v", v)] {
        if let Some((row, col)) = st.guarded(|| st.gpu.first_non_finite(x))? {
            return Err(Error::NonFinite {
                op: OP,
                what,
                row,
                col,
            });
        }
    }
    let x = st.guarded(|| RankOneInputs::from_device(&st.gpu, u, v))?;
    run_gpu_inputs(st, x)
}

/// [`Error::NeedsQ`] (or `NeedsData`) where the state holds neither Q nor the data that
/// the update needs.
fn check_kind<T: GpuScalar>(st: &GpuQr<T>) -> Result<()> {
    let has = match st.dims.policy {
        QPolicy::None => st.kept_data().is_some(),
        QPolicy::Full | QPolicy::Thin => st.q.is_some(),
    };
    if has {
        Ok(())
    } else {
        Err(crate::ops::needs_q_or_data(OP))
    }
}

fn run_gpu_inputs<T: GpuScalar>(st: &mut GpuQr<T>, x: RankOneInputs<T>) -> Result<()> {
    let out = match st.dims.policy {
        QPolicy::Thin => {
            let out = st.guarded(|| algo::thin_small_side(&st.gpu, st.factors(), &x))?;
            match out {
                Some(out) => out,
                None => st.guarded(|| algo::thin_projected(&st.gpu, st.factors(), &x))?,
            }
        }
        QPolicy::None => return run_gpu_reduced(st, x),
        QPolicy::Full => {
            let givens = st.params.givens;
            st.guarded(|| algo::full(&st.gpu, st.factors(), givens, &x))?
        }
    };
    let RankOneUpdated { r, d, q } = out;
    st.r = r;
    st.q = Some(q);
    st.d = d;
    Ok(())
}

/// The R-only kind: [`algo::r_only`] under the guard, then (past the rank test, where only
/// a device fault can fail and poisons the state) [`algo::r_only_finish`] on the kept data.
///
/// # Errors
/// As [`run_gpu`]; [`Error::NeedsData`] without kept data. On error the state is
/// unchanged.
fn run_gpu_reduced<T: GpuScalar>(st: &mut GpuQr<T>, x: RankOneInputs<T>) -> Result<()> {
    let kept = st
        .kept_data()
        .ok_or_else(|| crate::ops::needs_q_or_data(OP))?;
    let out = st.guarded(|| algo::r_only(&st.gpu, st.factors(), kept, x))?;
    let gpu = st.gpu.clone();
    let a = st.a.as_mut().expect("checked above");
    let b = st.b.as_ref().expect("checked above");
    let rho = algo::r_only_finish(&gpu, (a, b), &out);
    let rho = crate::state::gpu::poison_on_partial_write(&st.poisoned, rho)?;
    st.r = out.r;
    st.d = out.d;
    st.rho = rho;
    Ok(())
}
