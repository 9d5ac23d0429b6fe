//! Test scaffolding shared by the operations' unit tests.

use crate::base::dims::Dims;
use crate::base::params::{FactorParams, QPolicy};
use crate::base::scalar::Scalar;
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

/// The dimensions of a full-kind state: what the plan tests validate against.
pub(crate) fn full_dims(m: usize, n: usize, q: usize) -> Dims {
    Dims {
        m,
        n,
        q,
        policy: QPolicy::Full,
    }
}

/// An R-only state without kept data of a random m×n A and one right-hand side drawn from
/// `rng` (A first): what the updates that need Q or the data must refuse.
pub(crate) fn qless_state<T: Scalar>(rng: &mut StdRng, m: usize, n: usize) -> CpuQr<T> {
    let a = rand_mat::<T>(rng, m, n);
    let b = rand_mat::<T>(rng, m, 1);
    CpuQr::factorize(
        a.as_ref(),
        b.as_ref(),
        QPolicy::None,
        FactorParams::default(),
    )
    .unwrap()
}

/// Asserts that `call` fails with an error matching `pat` and that `unchanged` (evaluated
/// after the call) holds: the state-unchanged rule of a refused update.
macro_rules! assert_refused {
    ($call:expr, $pat:pat, $unchanged:expr) => {{
        let out = $call;
        assert!(matches!(out, Err($pat)), "{out:?}");
        assert!($unchanged, "a refused update changed the state");
    }};
}
pub(crate) use assert_refused;
