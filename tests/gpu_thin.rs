//! The thin-Q state (`QPolicy::Thin`: Q₁ m×n, R n×n, d n×q and the kept b) on the GPU
//! backend against the CPU backend's thin state and the f64 faer model
//! (docs/algorithms.md#thin-q-updates): every operation at k0 = 0 / middle / end with p = 1
//! and p = 7, f32 and f64; a random sequence of 60 mixed updates; the error paths (a
//! dependent new column, a deleted row that alone carries a direction, rank deficiency,
//! validation) with the state unchanged bit for bit; the host round trip; and the memory
//! the kind holds (nothing m×m). Tolerances are those of `tests/support/mod.rs`
//! (ε = 10·m·u, docs/algorithms.md#accuracy-measures).
//! Without a GPU every test prints "skipped"; `CUQR_REQUIRE_GPU=1` makes that a failure.

mod common;
mod support;

use std::sync::Arc;

use cuqr::{CpuQr, Error, FactorParams, Gpu, GpuQr, GpuScalar, Mat, QPolicy, QrUpdate, Scalar};
use rand::rngs::StdRng;
use rand::Rng;
use support::{bits, check_r_matches, check_state, random_mat, random_vec, rng, snapshot, Model};

fn gpu() -> Option<Arc<Gpu>> {
    common::gpu().map(Arc::new)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    InsertCols,
    DeleteCols,
    InsertRows,
    DeleteRows,
    RankOne,
}

const KINDS: [Kind; 5] = [
    Kind::InsertCols,
    Kind::DeleteCols,
    Kind::InsertRows,
    Kind::DeleteRows,
    Kind::RankOne,
];

/// One update with its inputs, applied identically to both backends and the model.
#[derive(Clone, Debug)]
enum Upd<T: Scalar> {
    InsertCols(usize, Mat<T>),
    DeleteCols(usize, usize),
    InsertRows(usize, Mat<T>, Mat<T>),
    DeleteRows(usize, usize),
    RankOne(Vec<T>, Vec<T>),
}

impl<T: Scalar> Upd<T> {
    fn make(
        kind: Kind,
        g: &mut StdRng,
        (m, n, q): (usize, usize, usize),
        k0: usize,
        p: usize,
    ) -> Self {
        match kind {
            Kind::InsertCols => Upd::InsertCols(k0, random_mat(g, m, p)),
            Kind::DeleteCols => Upd::DeleteCols(k0, p),
            Kind::InsertRows => Upd::InsertRows(k0, random_mat(g, p, n), random_mat(g, p, q)),
            Kind::DeleteRows => Upd::DeleteRows(k0, p),
            Kind::RankOne => Upd::RankOne(random_vec(g, m), random_vec(g, n)),
        }
    }
    fn apply(&self, st: &mut dyn QrUpdate<T>) -> cuqr::Result<()> {
        match self {
            Upd::InsertCols(k0, u) => st.insert_cols(*k0, u.as_ref()),
            Upd::DeleteCols(k0, p) => st.delete_cols(*k0, *p),
            Upd::InsertRows(k0, u, e) => st.insert_rows(*k0, u.as_ref(), e.as_ref()),
            Upd::DeleteRows(k0, p) => st.delete_rows(*k0, *p),
            Upd::RankOne(u, v) => st.rank_one(u, v),
        }
    }
    fn apply_model(&self, model: &mut Model) {
        match self {
            Upd::InsertCols(k0, u) => model.insert_cols(*k0, u),
            Upd::DeleteCols(k0, p) => model.delete_cols(*k0, *p),
            Upd::InsertRows(k0, u, e) => model.insert_rows(*k0, u, e),
            Upd::DeleteRows(k0, p) => model.delete_rows(*k0, *p),
            Upd::RankOne(u, v) => model.rank_one(u, v),
        }
    }
}

/// Thin states on both backends from the same A (m×n) and b (m×q).
fn pair<T: GpuScalar>(gpu: &Arc<Gpu>, a: &Mat<T>, b: &Mat<T>) -> (GpuQr<T>, CpuQr<T>) {
    let gs = GpuQr::factorize(
        gpu,
        a.as_ref(),
        b.as_ref(),
        QPolicy::Thin,
        FactorParams::default(),
    )
    .unwrap();
    let cs = CpuQr::factorize(
        a.as_ref(),
        b.as_ref(),
        QPolicy::Thin,
        FactorParams::default(),
    )
    .unwrap();
    (gs, cs)
}

/// The device buffers of a thin state: Q₁ m×n, R n×n, d n×q, b m×q.
fn check_shapes<T: GpuScalar>(gs: &GpuQr<T>, what: &str) {
    let (m, n, q) = (gs.nrows(), gs.ncols(), gs.nrhs());
    let q1 = gs.q_dev().expect("a thin state holds Q₁");
    let b = gs.b_dev().expect("a thin state keeps b");
    assert_eq!((q1.nrows(), q1.ncols()), (m, n), "{what}: Q₁");
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
    assert_eq!((b.nrows(), b.ncols()), (m, q), "{what}: b");
}

/// GPU state vs model (every accuracy check of tests/support) and vs the CPU state (R up to
/// row signs), R exactly zero below its diagonal, the thin shapes.
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

/// Every operation at k0 = 0 / middle / end, p = 1 and 7.
fn thin_updates_case<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    let dims = (300, 97, 2);
    for kind in KINDS {
        for p in [1usize, 7] {
            let limit = match kind {
                Kind::InsertCols => dims.1,
                Kind::DeleteCols => dims.1 - p,
                Kind::InsertRows => dims.0,
                Kind::DeleteRows => dims.0 - p,
                Kind::RankOne => 0,
            };
            for k0 in [0, limit / 2 + 1, limit] {
                let mut g = rng(seed ^ (k0 as u64) << 8 ^ p as u64);
                let a = random_mat::<T>(&mut g, dims.0, dims.1);
                let b = random_mat::<T>(&mut g, dims.0, dims.2);
                let (mut gs, mut cs) = pair(gpu, &a, &b);
                let mut model = Model::new(&a, &b);
                let upd = Upd::<T>::make(kind, &mut g, dims, k0, p);
                upd.apply(&mut gs)
                    .unwrap_or_else(|e| panic!("{kind:?} k0={k0} p={p}: {e}"));
                upd.apply(&mut cs).unwrap();
                upd.apply_model(&mut model);
                compare(&gs, &cs, &model, &format!("{kind:?} k0={k0} p={p}"));
            }
        }
    }
}

common::gpu_tests!(gpu => thin_updates_case { thin_updates_match_cpu_f64: f64 [61], thin_updates_match_cpu_f32: f32 [62] });

/// 60 random updates of every kind on both backends' thin states, each step checked.
fn thin_sequence<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    let mut g = rng(seed);
    let a = random_mat::<T>(&mut g, 150, 29);
    let b = random_mat::<T>(&mut g, 150, 2);
    let mut model = Model::new(&a, &b);
    let (mut gs, mut cs) = pair(gpu, &a, &b);
    for step in 0..60 {
        let (m, n, q) = (model.m(), model.n(), model.q());
        let kinds: Vec<Kind> = KINDS
            .iter()
            .copied()
            .filter(|k| match k {
                Kind::DeleteCols => n > 12,
                Kind::DeleteRows | Kind::InsertCols => m > n + 12,
                Kind::InsertRows => m < 260,
                Kind::RankOne => true,
            })
            .collect();
        let kind = kinds[g.random_range(0..kinds.len())];
        let p = g.random_range(1..5);
        let k0 = match kind {
            Kind::InsertCols => g.random_range(0..=n),
            Kind::DeleteCols => g.random_range(0..=n - p),
            Kind::InsertRows => g.random_range(0..=m),
            Kind::DeleteRows => g.random_range(0..=m - p),
            Kind::RankOne => 0,
        };
        let upd = Upd::<T>::make(kind, &mut g, (m, n, q), k0, p);
        upd.apply(&mut gs)
            .unwrap_or_else(|e| panic!("step {step} {kind:?}: {e}"));
        upd.apply(&mut cs).unwrap();
        upd.apply_model(&mut model);
        compare(
            &gs,
            &cs,
            &model,
            &format!("step {step} {kind:?} k0={k0} p={p}"),
        );
    }
}

common::gpu_tests!(gpu => thin_sequence { thin_sequence_f64: f64 [71], thin_sequence_f32: f32 [72] });

/// R, d, Q₁ and b bit for bit.
fn observe<T: GpuScalar>(gs: &GpuQr<T>) -> (support::Snapshot, (usize, usize, Vec<u64>)) {
    let b = gs
        .b_dev()
        .expect("a thin state keeps b")
        .to_host(gs.gpu())
        .unwrap();
    (snapshot::<T>(gs), bits(&b))
}

/// The error paths: the same error as the CPU backend's thin state, the GPU state unchanged.
fn thin_errors_case<T: GpuScalar>(gpu: &Arc<Gpu>) {
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
    let (mut gs, mut cs) = pair(gpu, &a, &b);
    for upd in &bad {
        let before = observe(&gs);
        let eg = upd.apply(&mut gs).err();
        let ec = upd.apply(&mut cs).err();
        assert!(
            before == observe(&gs),
            "{upd:?}: GPU state changed on error"
        );
        match (&eg, &ec) {
            (
                Some(Error::RankDeficient { column: cg, .. }),
                Some(Error::RankDeficient { column: cc, .. }),
            ) => {
                assert_eq!(cg, cc, "{upd:?}")
            }
            (Some(x), Some(y)) => assert_eq!(format!("{x:?}"), format!("{y:?}"), "{upd:?}"),
            _ => panic!("{upd:?}: GPU {eg:?} vs CPU {ec:?}"),
        }
    }
    // a row that alone spans a direction: row 7 is the only one touching column 4
    let mut a2 = a.clone();
    for i in 0..m {
        if i != 7 {
            a2[(i, 4)] = T::ZERO;
        }
    }
    let (mut gs, mut cs) = pair(gpu, &a2, &b);
    let before = observe(&gs);
    let eg = gs.delete_rows(7, 1).err();
    let ec = cs.delete_rows(7, 1).err();
    assert!(
        before == observe(&gs),
        "delete_rows: GPU state changed on error"
    );
    assert!(
        matches!(eg, Some(Error::DowndateFailed { row: 7, .. })),
        "{eg:?}"
    );
    assert!(
        matches!(ec, Some(Error::DowndateFailed { row: 7, .. })),
        "{ec:?}"
    );
    // and the state still works afterwards
    let mut model = Model::new(&a2, &b);
    let upd = Upd::DeleteRows(20, 3);
    upd.apply(&mut gs).unwrap();
    upd.apply(&mut cs).unwrap();
    upd.apply_model(&mut model);
    compare(&gs, &cs, &model, "delete_rows after a refused one");
}

common::gpu_tests!(gpu => thin_errors_case { thin_errors_match_cpu_f64: f64, thin_errors_match_cpu_f32: f32 });

/// A thin state to the host and back: the same factors, and both update alike.
fn thin_round_trip<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    let mut g = rng(seed);
    let a = random_mat::<T>(&mut g, 120, 33);
    let b = random_mat::<T>(&mut g, 120, 2);
    let (gs, _) = pair(gpu, &a, &b);
    let host = gs.to_cpu().unwrap();
    assert_eq!(host.dims().policy, QPolicy::Thin);
    assert!(snapshot::<T>(&host) == snapshot::<T>(&gs));
    let mut back = GpuQr::from_cpu(gpu, &host, None).unwrap();
    assert!(snapshot::<T>(&back) == snapshot::<T>(&gs));
    let mut host = host;
    let mut model = Model::new(&a, &b);
    let upd = Upd::InsertCols(5, random_mat::<T>(&mut g, 120, 3));
    upd.apply(&mut back).unwrap();
    upd.apply(&mut host).unwrap();
    upd.apply_model(&mut model);
    compare(&back, &host, &model, "after the round trip");
}

common::gpu_tests!(gpu => thin_round_trip { thin_round_trip_f64: f64 [91], thin_round_trip_f32: f32 [92] });
