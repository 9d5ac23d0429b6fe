//! Test scaffolding shared by the operations' unit tests.

use crate::base::params::{FactorParams, QPolicy};
use crate::ops::factorize::tests::rand_mat;
use crate::state::cpu::CpuQr;
use rand::rngs::StdRng;

/// A full-kind f64 state of a random m×n A and m×q b drawn from `rng` (A first).
pub(crate) fn full_state(rng: &mut StdRng, m: usize, n: usize, q: usize) -> CpuQr<f64> {
    let a = rand_mat::<f64>(rng, m, n);
    let b = rand_mat::<f64>(rng, m, q);
    CpuQr::factorize(
        a.as_ref(),
        b.as_ref(),
        QPolicy::Full,
        FactorParams::default(),
    )
    .unwrap()
}

/// Whether `s` holds the same R, d, Q and dimensions as `snap` (an update that failed must
/// leave the state so).
pub(crate) fn same_factors(s: &CpuQr<f64>, snap: &CpuQr<f64>) -> bool {
    s.r == snap.r && s.d == snap.d && s.q == snap.q && s.dims == snap.dims
}
