//! Property tests of the CPU backend (docs/algorithms.md#accuracy-measures): long random
//! sequences of mixed updates checked after every step against a dense model
//! of Ã and b̃, and round trips that must restore R. Every check and tolerance
//! is the shared test module's (`host/tests/common/model.rs`): e_Q ≤ 10·m·u,
//! e_A ≤ 10·m·u, ‖L‖ = 0 exactly, R and the solution against a fresh faer
//! factorisation of the model within κ-based first-order bounds.
//!
//! Dimensions stay modest (m ≤ 120, n ≤ 40) and keep m ≥ n + 3, so that a
//! uniform(−1, 1) matrix is well clear of the rank tolerance 10·max(m,n)·u·‖R‖_F
//! (a near-square f32 matrix would be rejected, legitimately, now and then).

mod common;

use common::{check_r_matches, check_state, random_mat, random_vec, rng, Model};
use cuqr::{CpuQr, FactorParams, QPolicy, QrUpdate, Scalar};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rand::rngs::StdRng;

const M_MAX: usize = 120;
const N_MAX: usize = 40;
/// Spare rows kept above n (see the module doc).
const MARGIN: usize = 3;
/// Largest block in a random step.
const P_MAX: usize = 4;

/// The five update kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    InsertCols,
    DeleteCols,
    InsertRows,
    DeleteRows,
    RankOne,
}

const ALL: [Op; 5] = [
    Op::InsertCols,
    Op::DeleteCols,
    Op::InsertRows,
    Op::DeleteRows,
    Op::RankOne,
];
/// What `QPolicy::None` allows (docs/algorithms.md#q-policy).
const NO_Q: [Op; 2] = [Op::InsertRows, Op::DeleteCols];

/// Largest valid p for `op` at dimensions (m, n), 0 if `op` cannot run.
fn p_max(op: Op, m: usize, n: usize) -> usize {
    let room = m.saturating_sub(n + MARGIN);
    match op {
        Op::InsertCols => P_MAX.min(N_MAX - n).min(room),
        Op::DeleteCols => P_MAX.min(n - 1),
        Op::InsertRows => P_MAX.min(M_MAX - m),
        Op::DeleteRows => P_MAX.min(room),
        Op::RankOne => 1,
    }
}

/// Runs `steps` (kind, p selector, k0 selector) from the allowed set `ops`
/// on a fresh m0×n0 factorisation, checking the state after every step.
/// Returns the number of updates applied.
#[allow(clippy::too_many_arguments)]
fn run_sequence<T: Scalar>(
    seed: u64,
    m0: usize,
    n0: usize,
    q: usize,
    (policy, keep_data): (QPolicy, bool),
    ops: &[Op],
    steps: &[(usize, usize, usize)],
) -> Result<usize, String> {
    let mut g = rng(seed);
    let a = random_mat::<T>(&mut g, m0, n0);
    let b = random_mat::<T>(&mut g, m0, q);
    let mut model = Model::new(&a, &b);
    let params = FactorParams {
        keep_data,
        ..FactorParams::default()
    };
    let mut st = CpuQr::factorize(a.as_ref(), b.as_ref(), policy, params)
        .map_err(|e| format!("factorize {m0}x{n0}: {e}"))?;
    check_state::<T>(&st, &model).map_err(|e| format!("after factorize {m0}x{n0}: {e}"))?;
    let mut applied = 0;
    for (i, &(ks, ps, k0s)) in steps.iter().enumerate() {
        let (m, n) = (model.m(), model.n());
        // The requested kind, or the next one (cyclically) that fits.
        let Some(op) = (0..ops.len())
            .map(|t| ops[(ks + t) % ops.len()])
            .find(|&op| p_max(op, m, n) > 0)
        else {
            break;
        };
        let p = 1 + ps % p_max(op, m, n);
        let what = match op {
            Op::InsertCols => {
                let k0 = k0s % (n + 1);
                let u = random_mat::<T>(&mut g, m, p);
                st.insert_cols(k0, u.as_ref()).map_err(|e| e.to_string())?;
                model.insert_cols(k0, &u);
                format!("insert_cols(k0={k0}, p={p})")
            }
            Op::DeleteCols => {
                let k0 = k0s % (n - p + 1);
                st.delete_cols(k0, p).map_err(|e| e.to_string())?;
                model.delete_cols(k0, p);
                format!("delete_cols(k0={k0}, p={p})")
            }
            Op::InsertRows => {
                let k0 = k0s % (m + 1);
                let u = random_mat::<T>(&mut g, p, n);
                let e = random_mat::<T>(&mut g, p, q);
                st.insert_rows(k0, u.as_ref(), e.as_ref())
                    .map_err(|e| e.to_string())?;
                model.insert_rows(k0, &u, &e);
                format!("insert_rows(k0={k0}, p={p})")
            }
            Op::DeleteRows => {
                let k0 = k0s % (m - p + 1);
                st.delete_rows(k0, p).map_err(|e| e.to_string())?;
                model.delete_rows(k0, p);
                format!("delete_rows(k0={k0}, p={p})")
            }
            Op::RankOne => {
                let u = random_vec::<T>(&mut g, m);
                let v = random_vec::<T>(&mut g, n);
                st.rank_one(&u, &v).map_err(|e| e.to_string())?;
                model.rank_one(&u, &v);
                "rank_one".to_string()
            }
        };
        applied += 1;
        check_state::<T>(&st, &model).map_err(|e| {
            format!(
                "step {i}: {what} on {m}x{n} (now {}x{}): {e}",
                model.m(),
                model.n()
            )
        })?;
    }
    Ok(applied)
}

/// One step's selectors: kind, p and k0 (reduced modulo the valid ranges).
fn steps(
    len: std::ops::RangeInclusive<usize>,
) -> impl Strategy<Value = Vec<(usize, usize, usize)>> {
    prop::collection::vec((0usize..5, 0usize..64, 0usize..1024), len)
}

/// Starting shape (m0, n0) with n0 ≤ N_MAX/2 and n0 + MARGIN ≤ m0 ≤ 80.
fn shape() -> impl Strategy<Value = (usize, usize)> {
    (1usize..=N_MAX / 2).prop_flat_map(|n| ((n + MARGIN)..=80, Just(n)))
}

/// A sequence of every kind of update on a state of `kind` (the full, thin and R-only
/// kinds with kept data all take every update).
fn mixed<T: Scalar>(
    seed: u64,
    (m0, n0): (usize, usize),
    q: usize,
    st: &[(usize, usize, usize)],
    kind: (QPolicy, bool),
) -> Result<(), TestCaseError> {
    let applied = run_sequence::<T>(seed, m0, n0, q, kind, &ALL, st)
        .map_err(|e| TestCaseError::fail(format!("{} seed={seed}: {e}", T::NAME)))?;
    // rank_one always fits, so every step runs.
    prop_assert_eq!(applied, st.len());
    Ok(())
}

fn no_q<T: Scalar>(
    seed: u64,
    (m0, n0): (usize, usize),
    q: usize,
    st: &[(usize, usize, usize)],
) -> Result<(), TestCaseError> {
    let applied = run_sequence::<T>(seed, m0, n0, q, (QPolicy::None, false), &NO_Q, st)
        .map_err(|e| TestCaseError::fail(format!("{} seed={seed}: {e}", T::NAME)))?;
    prop_assert!(applied >= 1);
    Ok(())
}

/// Factorises a random m×n problem with `q` right-hand sides from `seed`, runs
/// `roundtrip` (an insertion at k0 and the deletion of the same p) on the state, and
/// checks that R is restored up to row signs and the whole state matches the model
/// of A.
fn check_roundtrip<T: Scalar>(
    seed: u64,
    (m, n): (usize, usize),
    q: usize,
    (k0, p): (usize, usize),
    roundtrip: impl FnOnce(&mut CpuQr<T>, &mut StdRng) -> cuqr::Result<()>,
) -> Result<(), TestCaseError> {
    let mut g = rng(seed);
    let a = random_mat::<T>(&mut g, m, n);
    let b = random_mat::<T>(&mut g, m, q);
    let model = Model::new(&a, &b);
    let fail = |e: String| {
        TestCaseError::fail(format!(
            "{} seed={seed} m={m} n={n} k0={k0} p={p}: {e}",
            T::NAME
        ))
    };
    let mut st = CpuQr::factorize(
        a.as_ref(),
        b.as_ref(),
        QPolicy::Full,
        FactorParams::default(),
    )
    .map_err(|e| fail(e.to_string()))?;
    let r0 = st.r().unwrap();
    roundtrip(&mut st, &mut g).map_err(|e| fail(e.to_string()))?;
    check_r_matches(&st.r().unwrap(), &r0, &model.a).map_err(fail)?;
    check_state::<T>(&st, &model).map_err(fail)?;
    Ok(())
}

/// insert_cols(k0, U) then delete_cols(k0, p) restores R up to row signs
/// (and the whole state matches the model of A).
fn insert_delete_cols_roundtrip<T: Scalar>(
    seed: u64,
    (m, n): (usize, usize),
    ps: usize,
    k0s: usize,
) -> Result<(), TestCaseError> {
    let p = 1 + ps % (m - n - MARGIN + 1).min(N_MAX - n).min(P_MAX + 4);
    let k0 = k0s % (n + 1);
    check_roundtrip::<T>(seed, (m, n), 2, (k0, p), |st, g| {
        let u = random_mat::<T>(g, m, p);
        st.insert_cols(k0, u.as_ref())?;
        st.delete_cols(k0, p)
    })
}

/// insert_rows(k0, U, e) then delete_rows(k0, p) restores R up to row signs.
fn insert_delete_rows_roundtrip<T: Scalar>(
    seed: u64,
    (m, n): (usize, usize),
    ps: usize,
    k0s: usize,
) -> Result<(), TestCaseError> {
    let p = 1 + ps % (P_MAX + 4);
    let k0 = k0s % (m + 1);
    check_roundtrip::<T>(seed, (m, n), 1, (k0, p), |st, g| {
        let u = random_mat::<T>(g, p, n);
        let e = random_mat::<T>(g, p, 1);
        st.insert_rows(k0, u.as_ref(), e.as_ref())?;
        st.delete_rows(k0, p)
    })
}

/// One 16-case proptest per (name, body, scalar type) over a random seed, shape,
/// right-hand-side count 1..=2 and a step list of `lo..=hi` steps; the body gets
/// (seed, shape, q, &steps) and then the extra arguments.
macro_rules! sequence_props {
    ($($name:ident: $body:ident::<$t:ty>(steps $lo:literal..=$hi:literal $(, $extra:expr)?);)+) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(16))]
            $(
                #[test]
                fn $name(seed in any::<u64>(), sh in shape(), q in 1usize..=2, st in steps($lo..=$hi)) {
                    $body::<$t>(seed, sh, q, &st $(, $extra)?)?;
                }
            )+
        }
    };
}

/// One 16-case proptest per (name, body, scalar type) over a random seed, shape,
/// block-size seed 0..64 and position seed 0..1024.
macro_rules! roundtrip_props {
    ($($name:ident: $body:ident::<$t:ty>;)+) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(16))]
            $(
                #[test]
                fn $name(seed in any::<u64>(), sh in shape(), ps in 0usize..64, k0s in 0usize..1024) {
                    $body::<$t>(seed, sh, ps, k0s)?;
                }
            )+
        }
    };
}

sequence_props! {
    mixed_sequence_f64: mixed::<f64>(steps 50..=60, (QPolicy::Full, false));
    mixed_sequence_f32: mixed::<f32>(steps 50..=60, (QPolicy::Full, false));
    thin_sequence_f64: mixed::<f64>(steps 50..=60, (QPolicy::Thin, false));
    thin_sequence_f32: mixed::<f32>(steps 50..=60, (QPolicy::Thin, false));
    r_only_with_data_sequence_f32: mixed::<f32>(steps 50..=60, (QPolicy::None, true));
    r_only_with_data_sequence_f64: mixed::<f64>(steps 50..=60, (QPolicy::None, true));
    no_q_sequence_f64: no_q::<f64>(steps 20..=40);
    no_q_sequence_f32: no_q::<f32>(steps 20..=40);
}

roundtrip_props! {
    cols_roundtrip_f64: insert_delete_cols_roundtrip::<f64>;
    cols_roundtrip_f32: insert_delete_cols_roundtrip::<f32>;
    rows_roundtrip_f64: insert_delete_rows_roundtrip::<f64>;
    rows_roundtrip_f32: insert_delete_rows_roundtrip::<f32>;
}
