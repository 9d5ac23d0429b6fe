//! The thin-Q and R-only states on the GPU backend against the CPU backend's state of the
//! same kind and the f64 faer model (docs/algorithms.md#thin-q-updates,
//! docs/algorithms.md#updates-without-q): `QPolicy::Thin` (Q₁ m×n, R n×n, d n×q and the
//! kept b) and `QPolicy::None` with and without kept data (R n×n, d n×q, the residual
//! norms, and A and b on the device when kept). Every operation at k0 = 0 / middle / end
//! with p = 1 and p = 7, f32 and f64 (an R-only state without data deletes the rows it is
//! given and refuses the operations that need the data); a random sequence of 60 mixed
//! updates per kind; the error paths (a dependent new column, a deleted row that alone
//! carries a direction, rank deficiency, validation) with the state unchanged bit for bit;
//! the host round trip; and the memory each kind holds (nothing m×m). Tolerances are those of `host/tests/common/model.rs`
//! (ε = 10·m·u, docs/algorithms.md#accuracy-measures).
//! Without a GPU every test prints "skipped"; `CUQR_REQUIRE_GPU=1` makes that a failure.

mod common;

use std::sync::Arc;

use common::{
    bits, check_r_matches, check_state, random_mat, random_vec, rng, shared_gpu, snapshot, Model,
    StateKind, Upd, UpdateKind, ALL_UPDATES,
};
use cuqr::{CpuQr, DevMat, Error, Gpu, GpuQr, GpuScalar, Mat, QPolicy, QrUpdate};

/// The state kinds under test.
const STATES: [StateKind; 3] = [StateKind::Thin, StateKind::NoneKeep, StateKind::NoneBare];

/// States of `state`'s kind on both backends from the same A (m×n) and b (m×q).
fn pair<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    state: StateKind,
    a: &Mat<T>,
    b: &Mat<T>,
) -> (GpuQr<T>, CpuQr<T>) {
    (state.gpu(gpu, a, b), state.cpu(a, b))
}

fn shape<T: GpuScalar>(x: Option<&DevMat<T>>) -> Option<(usize, usize)> {
    x.map(|x| (x.nrows(), x.ncols()))
}

/// The device buffers: R n×n and d n×q for every kind; Q₁ m×n and b m×q for the thin
/// kind; A m×n and b m×q for an R-only state with kept data; nothing else.
fn check_shapes<T: GpuScalar>(gs: &GpuQr<T>, what: &str) {
    let (m, n, q) = (gs.nrows(), gs.ncols(), gs.nrhs());
    assert_eq!(
        (gs.r_dev().nrows(), gs.r_dev().ncols()),
        (n, n),
        "{what}: R"
    );
    assert_eq!(
        (gs.d_dev().nrows(), gs.d_dev().ncols()),
        (n, q),
        "{what}: d"
    );
    let thin = gs.q_policy() == QPolicy::Thin;
    let kept = gs.a_dev().is_some();
    assert!(!(thin && kept), "{what}: a thin state keeps no A");
    assert_eq!(shape(gs.q_dev()), thin.then_some((m, n)), "{what}: Q₁");
    let view_shape = |x: Option<cuqr::DevMatView<'_, T>>| x.map(|x| (x.nrows(), x.ncols()));
    assert_eq!(
        view_shape(gs.b_dev()),
        (thin || kept).then_some((m, q)),
        "{what}: b"
    );
    assert_eq!(view_shape(gs.a_dev()), kept.then_some((m, n)), "{what}: A");
}

/// GPU state vs model (every accuracy check of host/tests/common/model.rs) and vs the CPU state (R up to
/// row signs), R exactly zero below its diagonal, the kind's shapes.
fn compare<T: GpuScalar>(gs: &GpuQr<T>, cs: &CpuQr<T>, model: &Model, what: &str) {
    check_state::<T>(gs, model).unwrap_or_else(|e| panic!("{what}: GPU vs model: {e}"));
    check_state::<T>(cs, model).unwrap_or_else(|e| panic!("{what}: CPU vs model: {e}"));
    let (rg, rc) = (gs.r().unwrap(), cs.r().unwrap());
    check_r_matches(&rg, &rc, &model.a).unwrap_or_else(|e| panic!("{what}: GPU R vs CPU R: {e}"));
    for j in 0..rg.ncols() {
        for i in j + 1..rg.nrows() {
            assert_eq!(rg[(i, j)].to_f64(), 0.0, "{what}: R({i},{j})");
        }
    }
    check_shapes(gs, what);
}

/// `steps` on both backends and the model (those the kind runs), each compared.
fn run_steps<T: GpuScalar>(
    state: StateKind,
    (gs, cs): (&mut GpuQr<T>, &mut CpuQr<T>),
    model: &mut Model,
    steps: Vec<Upd<T>>,
    label: &str,
) {
    for upd in steps {
        let kind = upd.kind();
        if !state.runs(kind) {
            continue;
        }
        let what = format!("{state:?} {label} {kind:?}");
        upd.apply_with_rows(gs, model)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        upd.apply_with_rows(cs, model).unwrap();
        upd.apply_model(model);
        compare(gs, cs, model, &what);
    }
}

/// The same error on both backends: equal, or (where the message carries a computed
/// value) the same variant and position.
fn same_error(eg: &Option<Error>, ec: &Option<Error>, what: &str) {
    match (eg, ec) {
        (
            Some(Error::RankDeficient { column: cg, .. }),
            Some(Error::RankDeficient { column: cc, .. }),
        ) => assert_eq!(cg, cc, "{what}"),
        (
            Some(Error::DowndateFailed { row: rg, .. }),
            Some(Error::DowndateFailed { row: rc, .. }),
        ) => assert_eq!(rg, rc, "{what}"),
        (Some(x), Some(y)) => assert_eq!(format!("{x:?}"), format!("{y:?}"), "{what}"),
        _ => panic!("{what}: GPU {eg:?} vs CPU {ec:?}"),
    }
}

/// Every operation at k0 = 0 / middle / end, p = 1 and 7, on every kind.
fn kinds_updates_case<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    for state in STATES {
        updates_case::<T>(gpu, state, seed);
    }
}

fn updates_case<T: GpuScalar>(gpu: &Arc<Gpu>, state: StateKind, seed: u64) {
    let dims = (300, 97, 2);
    for kind in ALL_UPDATES {
        for p in [1usize, 7] {
            let limit = kind.last_k0((dims.0, dims.1), p);
            for k0 in [0, limit / 2 + 1, limit] {
                let mut g = rng(seed ^ (k0 as u64) << 8 ^ p as u64);
                let a = random_mat::<T>(&mut g, dims.0, dims.1);
                let b = random_mat::<T>(&mut g, dims.0, dims.2);
                let (mut gs, mut cs) = pair(gpu, state, &a, &b);
                let mut model = Model::new(&a, &b);
                let upd = Upd::<T>::make(kind, &mut g, dims, k0, p);
                let what = format!("{state:?} {kind:?} k0={k0} p={p}");
                if !state.runs(kind) {
                    let before = snapshot::<T>(&gs);
                    let eg = upd.apply_with_rows(&mut gs, &model).err();
                    let ec = upd.apply_with_rows(&mut cs, &model).err();
                    assert!(
                        matches!(eg, Some(Error::NeedsData { .. })),
                        "{what}: {eg:?}"
                    );
                    same_error(&eg, &ec, &what);
                    assert!(before == snapshot::<T>(&gs), "{what}: state changed");
                    continue;
                }
                upd.apply_with_rows(&mut gs, &model)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                upd.apply_with_rows(&mut cs, &model).unwrap();
                upd.apply_model(&mut model);
                compare(&gs, &cs, &model, &what);
            }
        }
    }
}

common::gpu_tests!(shared_gpu => kinds_updates_case { kinds_updates_match_cpu_f64: f64 [61], kinds_updates_match_cpu_f32: f32 [62] });

/// 60 random updates of every operation the kind runs, on both backends, each step
/// checked.
fn kinds_sequence<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    for state in STATES {
        sequence::<T>(gpu, state, seed);
    }
}

fn sequence<T: GpuScalar>(gpu: &Arc<Gpu>, state: StateKind, seed: u64) {
    let mut g = rng(seed);
    let a = random_mat::<T>(&mut g, 150, 29);
    let b = random_mat::<T>(&mut g, 150, 2);
    let mut model = Model::new(&a, &b);
    let (mut gs, mut cs) = pair(gpu, state, &a, &b);
    for step in 0..60 {
        let (m, n, q) = (model.m(), model.n(), model.q());
        let kinds: Vec<UpdateKind> = ALL_UPDATES
            .iter()
            .copied()
            .filter(|k| {
                state.runs(*k)
                    && match k {
                        UpdateKind::DeleteCols => n > 12,
                        UpdateKind::DeleteRows | UpdateKind::InsertCols => m > n + 12,
                        UpdateKind::InsertRows => m < 260,
                        UpdateKind::RankOne => true,
                    }
            })
            .collect();
        let (upd, k0, p) = Upd::<T>::random(&kinds, &mut g, (m, n, q));
        let kind = upd.kind();
        let what = format!("{state:?} step {step} {kind:?} k0={k0} p={p}");
        upd.apply_with_rows(&mut gs, &model)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        upd.apply_with_rows(&mut cs, &model).unwrap();
        upd.apply_model(&mut model);
        compare(&gs, &cs, &model, &what);
    }
}

common::gpu_tests!(shared_gpu => kinds_sequence { kinds_sequence_f64: f64 [71], kinds_sequence_f32: f32 [72] });

/// R, d, Q₁, the kept data and the residual norms, bit for bit.
#[allow(clippy::type_complexity)]
fn observe<T: GpuScalar>(
    gs: &GpuQr<T>,
) -> (common::Snapshot, Vec<(usize, usize, Vec<u64>)>, Vec<u64>) {
    let kept = [gs.b_dev(), gs.a_dev()]
        .into_iter()
        .flatten()
        .map(|x| bits(&x.to_host(gs.gpu()).unwrap()))
        .collect();
    let rho = gs
        .solve()
        .unwrap()
        .residual_norms
        .iter()
        .map(|x| x.to_bits())
        .collect();
    (snapshot::<T>(gs), kept, rho)
}

/// The error paths of every kind: the same error as the CPU backend's state of the kind,
/// the GPU state unchanged.
fn kinds_errors_case<T: GpuScalar>(gpu: &Arc<Gpu>) {
    for state in STATES {
        errors_case::<T>(gpu, state);
    }
}

fn errors_case<T: GpuScalar>(gpu: &Arc<Gpu>, state: StateKind) {
    let mut g = rng(81);
    let (m, n) = (60, 11);
    let a = random_mat::<T>(&mut g, m, n);
    let b = random_mat::<T>(&mut g, m, 1);
    // a combination of existing columns; a rank-one update that cancels column 5;
    // validation errors
    let dependent = Mat::from_fn(m, 1, |i, _| a[(i, 0)] - T::from_f64(2.0) * a[(i, 3)]);
    let cancel_u: Vec<T> = (0..m).map(|i| -a[(i, 5)]).collect();
    let cancel_v: Vec<T> = (0..n)
        .map(|j| if j == 5 { T::ONE } else { T::ZERO })
        .collect();
    let mut nan_u = random_mat::<T>(&mut g, m, 2);
    nan_u[(7, 1)] = T::from_f64(f64::NAN);
    let bad: Vec<Upd<T>> = vec![
        Upd::InsertCols(2, dependent),
        Upd::RankOne(cancel_u, cancel_v),
        Upd::InsertCols(12, random_mat(&mut g, m, 1)),
        Upd::InsertCols(2, random_mat(&mut g, m - 1, 1)),
        Upd::InsertCols(2, nan_u),
        Upd::DeleteCols(0, 0),
        Upd::DeleteCols(0, n),
        Upd::DeleteRows(0, m - n + 1),
        Upd::DeleteRows(m, 1),
        Upd::InsertRows(m + 1, random_mat(&mut g, 1, n), random_mat(&mut g, 1, 1)),
        Upd::InsertRows(0, random_mat(&mut g, 1, n - 1), random_mat(&mut g, 1, 1)),
        Upd::RankOne(random_vec(&mut g, m + 1), random_vec(&mut g, n)),
    ];
    let model = Model::new(&a, &b);
    let (mut gs, mut cs) = pair(gpu, state, &a, &b);
    for upd in &bad {
        let what = format!("{state:?} {upd:?}");
        let before = observe(&gs);
        let eg = upd.apply_with_rows(&mut gs, &model).err();
        let ec = upd.apply_with_rows(&mut cs, &model).err();
        assert!(before == observe(&gs), "{what}: GPU state changed on error");
        same_error(&eg, &ec, &what);
    }
    // a row that alone spans a direction: row 7 is the only one touching column 4
    let mut a2 = a.clone();
    for i in 0..m {
        if i != 7 {
            a2[(i, 4)] = T::ZERO;
        }
    }
    let mut model = Model::new(&a2, &b);
    let (mut gs, mut cs) = pair(gpu, state, &a2, &b);
    let before = observe(&gs);
    let lone = Upd::<T>::DeleteRows(7, 1);
    let eg = lone.apply_with_rows(&mut gs, &model).err();
    let ec = lone.apply_with_rows(&mut cs, &model).err();
    assert!(
        before == observe(&gs),
        "{state:?} lone row: GPU state changed on error"
    );
    assert!(
        matches!(eg, Some(Error::DowndateFailed { row: 7, .. })),
        "{state:?} {eg:?}"
    );
    same_error(&eg, &ec, &format!("{state:?} lone row"));
    // and the state still works afterwards
    let upd = Upd::DeleteRows(20, 3);
    upd.apply_with_rows(&mut gs, &model).unwrap();
    upd.apply_with_rows(&mut cs, &model).unwrap();
    upd.apply_model(&mut model);
    compare(
        &gs,
        &cs,
        &model,
        &format!("{state:?} delete_rows after a refused one"),
    );
}

common::gpu_tests!(shared_gpu => kinds_errors_case { kinds_errors_match_cpu_f64: f64, kinds_errors_match_cpu_f32: f32 });

/// Each kind to the host and back: the same factors and kept data, and both update alike.
fn kinds_round_trip<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    for state in STATES {
        let mut g = rng(seed);
        let a = random_mat::<T>(&mut g, 120, 33);
        let b = random_mat::<T>(&mut g, 120, 2);
        let (gs, _) = pair(gpu, state, &a, &b);
        let host = gs.to_cpu().unwrap();
        assert_eq!(host.dims().policy, state.policy());
        assert!(snapshot::<T>(&host) == snapshot::<T>(&gs), "{state:?}");
        let mut back = GpuQr::from_cpu(gpu, &host, None).unwrap();
        assert!(observe(&back) == observe(&gs), "{state:?}");
        let mut host = host;
        let mut model = Model::new(&a, &b);
        let upd = if state.runs(UpdateKind::InsertCols) {
            Upd::InsertCols(5, random_mat::<T>(&mut g, 120, 3))
        } else {
            Upd::DeleteRows(5, 3)
        };
        upd.apply_with_rows(&mut back, &model).unwrap();
        upd.apply_with_rows(&mut host, &model).unwrap();
        upd.apply_model(&mut model);
        compare(
            &back,
            &host,
            &model,
            &format!("{state:?} after the round trip"),
        );
    }
}

common::gpu_tests!(shared_gpu => kinds_round_trip { kinds_round_trip_f64: f64 [91], kinds_round_trip_f32: f32 [92] });

/// Inputs that take the thin kind's explicit paths (a deleted row of leverage near 1, new
/// columns and a rank-one u mostly inside range(A)), and the same inputs on every kind:
/// the same answers as the CPU backend.
fn kinds_near_range<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    for state in STATES {
        let mut g = rng(seed);
        let (m, n) = (140, 23);
        let mut a = random_mat::<T>(&mut g, m, n);
        for j in 0..n {
            a[(9, j)] *= T::from_f64(40.0);
        }
        let b = random_mat::<T>(&mut g, m, 2);
        let (mut gs, mut cs) = pair(gpu, state, &a, &b);
        let mut model = Model::new(&a, &b);
        // columns (and u) = A·x plus a small part outside range(A)
        let mix = random_mat::<T>(&mut g, n, 3);
        let small = random_mat::<T>(&mut g, m, 3);
        let near = Mat::from_fn(m, 3, |i, k| {
            let s: f64 = (0..n)
                .map(|j| a[(i, j)].to_f64() * mix[(j, k)].to_f64())
                .sum();
            T::from_f64(s + 1e-2 * small[(i, k)].to_f64())
        });
        let u: Vec<T> = (0..m).map(|i| near[(i, 0)]).collect();
        let cols = Mat::from_fn(m, 2, |i, k| near[(i, k + 1)]);
        let steps: Vec<Upd<T>> = vec![
            Upd::InsertCols(4, cols),
            Upd::RankOne(u, random_vec(&mut g, n + 2)),
            Upd::DeleteRows(9, 1),
        ];
        run_steps(state, (&mut gs, &mut cs), &mut model, steps, "near range");
    }
}

common::gpu_tests!(shared_gpu => kinds_near_range { kinds_near_range_f64: f64 [101], kinds_near_range_f32: f32 [102] });

/// A tall state (132,309 rows): rank-one, single-column insertion and row deletion on every
/// kind, against the CPU backend.
fn kinds_tall_products<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    for state in STATES {
        let mut g = rng(seed);
        let (m, n) = (16 * 8192 + 1237, 19);
        let a = random_mat::<T>(&mut g, m, n);
        let b = random_mat::<T>(&mut g, m, 1);
        let (mut gs, mut cs) = pair(gpu, state, &a, &b);
        let mut model = Model::new(&a, &b);
        let steps: Vec<Upd<T>> = vec![
            Upd::RankOne(random_vec(&mut g, m), random_vec(&mut g, n)),
            Upd::InsertCols(7, random_mat(&mut g, m, 1)),
            Upd::DeleteRows(m / 2, 1),
        ];
        run_steps(state, (&mut gs, &mut cs), &mut model, steps, "tall");
    }
}

common::gpu_tests!(shared_gpu => kinds_tall_products { kinds_tall_products_f64: f64 [111], kinds_tall_products_f32: f32 [112] });
