//! GPU backend vs CPU backend and the f64 faer model (docs/design.md;
//! docs/algorithms.md#blocked-householder-qr,
//! docs/algorithms.md#column-deletion, docs/algorithms.md#row-insertion,
//! docs/algorithms.md#accuracy-measures): factorize, solve, delete_cols, insert_rows (and every
//! update the GPU wires: extend [`GPU_WIRED`]), f32 and f64, ragged sizes, k0 at 0 / middle / end,
//! p = 1 and p > 1, random update sequences through `&mut dyn QrUpdate<T>`, the same
//! validation errors with the state unchanged, device out-of-memory, and launch counts.
//! Tolerances are those of `host/tests/common/model.rs` (ε = 10·m·u,
//! docs/algorithms.md#accuracy-measures).
//! Without a GPU every test prints "skipped"; `CUQR_REQUIRE_GPU=1` makes that a failure.

mod common;

use std::sync::Arc;

use common::{
    check_r_matches, check_state, random_mat, random_vec, rng, snapshot, Model, StateKind, Upd,
    UpdateKind,
};
use cuqr::GpuQr;
use cuqr::GpuScalar;
use cuqr::{
    ColumnStrip, CpuQr, Error, FactorParams, Givens, Gpu, Mat, QPolicy, QrUpdate, RowRemoval,
    UpdateParams,
};
use rand::rngs::StdRng;

/// The updates the GPU backend runs: all five.
const GPU_WIRED: &[UpdateKind] = &[
    UpdateKind::InsertCols,
    UpdateKind::DeleteCols,
    UpdateKind::InsertRows,
    UpdateKind::DeleteRows,
    UpdateKind::RankOne,
];

/// The strategies that change how `kind` runs on the GPU (docs/algorithms.md#givens-rotations,
/// docs/algorithms.md#row-deletion): the
/// Givens-based updates run under the two-phase default and every seed design.
fn strategies(kind: UpdateKind) -> Vec<UpdateParams> {
    let mut out = vec![UpdateParams::default()];
    match kind {
        UpdateKind::InsertCols => {
            out.push(UpdateParams {
                givens: Givens::Wavefront,
                ..UpdateParams::default()
            });
            // the strip by one blocked Householder QR (Auto picks it only for large p)
            out.push(UpdateParams {
                column_strip: ColumnStrip::Householder,
                ..UpdateParams::default()
            });
        }
        UpdateKind::RankOne => out.push(UpdateParams {
            givens: Givens::Wavefront,
            ..UpdateParams::default()
        }),
        UpdateKind::DeleteRows => {
            for row_removal in [RowRemoval::Composite, RowRemoval::SeparateStreams] {
                out.push(UpdateParams {
                    givens: Givens::Wavefront,
                    row_removal,
                    ..UpdateParams::default()
                });
            }
            // no rotations: A′ = Q(kept, :)·R refactorised (TwoPhase picks it for large p)
            out.push(UpdateParams {
                row_removal: RowRemoval::Refactorise,
                ..UpdateParams::default()
            });
        }
        UpdateKind::DeleteCols | UpdateKind::InsertRows => {}
    }
    out
}

/// Needs Q?
fn needs_q(k: UpdateKind) -> bool {
    matches!(
        k,
        UpdateKind::InsertCols | UpdateKind::DeleteRows | UpdateKind::RankOne
    )
}

/// Both backends factorised from the same random A (m×n) and b (m×q).
#[allow(clippy::type_complexity)]
fn pair<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    g: &mut StdRng,
    (m, n, q): (usize, usize, usize),
    policy: QPolicy,
) -> (GpuQr<T>, CpuQr<T>, Model) {
    let a = random_mat::<T>(g, m, n);
    let b = random_mat::<T>(g, m, q);
    let gs =
        GpuQr::factorize(gpu, a.as_ref(), b.as_ref(), policy, FactorParams::default()).unwrap();
    let cs = CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default()).unwrap();
    (gs, cs, Model::new(&a, &b))
}

/// GPU state vs model (all docs/algorithms.md#accuracy-measures checks) and vs the CPU state (R up
/// to row signs, x, residual norms within the module-doc bounds).
fn compare<T: GpuScalar>(gs: &GpuQr<T>, cs: &CpuQr<T>, model: &Model, what: &str) {
    check_state::<T>(gs, model).unwrap_or_else(|e| panic!("{what}: GPU vs model: {e}"));
    let (rg, rc) = (gs.r().unwrap(), cs.r().unwrap());
    check_r_matches(&rg, &rc, &model.a).unwrap_or_else(|e| panic!("{what}: GPU R vs CPU R: {e}"));
    // ‖L‖ = 0 exactly, below the diagonal and in the rows below n.
    for j in 0..rg.ncols() {
        for i in j + 1..rg.nrows() {
            assert_eq!(rg[(i, j)].to_f64(), 0.0, "{what}: R({i},{j})");
        }
    }
    assert_eq!(gs.q().unwrap().is_some(), cs.q().unwrap().is_some());
}

fn factorize_case<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64, dims: (usize, usize, usize)) {
    for policy in [QPolicy::Full, QPolicy::None] {
        let mut g = rng(seed);
        let (gs, cs, model) = pair::<T>(gpu, &mut g, dims, policy);
        compare(&gs, &cs, &model, &format!("factorize {dims:?} {policy:?}"));
        // solve: x and residuals from the GPU (trsm, reduce_nrm2) vs the CPU solve;
        // both are checked against faer in `check_state`, here they must also agree
        // with each other within the same bound (twice the x tolerance).
        let (sg, sc) = (gs.solve().unwrap(), cs.solve().unwrap());
        assert_eq!((sg.x.nrows(), sg.x.ncols()), (sc.x.nrows(), sc.x.ncols()));
        assert_eq!(sg.residual_norms.len(), sc.residual_norms.len());
    }
}

/// The profiled factorisation (`factorize_dev_phases`, the phase split) gives a
/// state that passes the same checks as `factorize`'s, and its phases fit in its total.
fn profiled_case<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64, (m, n, q): (usize, usize, usize)) {
    for policy in [QPolicy::Full, QPolicy::None] {
        let mut g = rng(seed);
        let a = random_mat::<T>(&mut g, m, n);
        let b = random_mat::<T>(&mut g, m, q);
        let (gs, t) = GpuQr::factorize_dev_phases(
            gpu,
            cuqr::internals::gpu::DevMat::from_host(gpu, a.as_ref()).unwrap(),
            cuqr::internals::gpu::DevMat::from_host(gpu, b.as_ref()).unwrap(),
            policy,
            FactorParams::default(),
        )
        .unwrap();
        let cs = CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default()).unwrap();
        let what = format!("profiled factorize {:?} {policy:?} {}", (m, n, q), T::NAME);
        compare(&gs, &cs, &Model::new(&a, &b), &what);
        let phases = [t.panel_ms, t.trailing_ms, t.rhs_ms, t.rank_ms, t.q_ms];
        assert!(
            phases.iter().all(|x| x.is_finite() && *x >= 0.0),
            "{what}: {t:?}"
        );
        assert!(
            t.panel_ms > 0.0 && t.rank_ms > 0.0 && (policy == QPolicy::None) == (t.q_ms == 0.0),
            "{what}: {t:?}"
        );
        assert!(phases.iter().sum::<f64>() <= t.total_ms, "{what}: {t:?}");
    }
}

#[test]
fn profiled_factorisation_matches_cpu() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    profiled_case::<f64>(&gpu, 150, (1000, 333, 2));
    profiled_case::<f32>(&gpu, 151, (2049, 130, 1));
}

#[test]
fn factorize_and_solve_match_cpu() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    for (i, dims) in [(1000, 333, 2), (257, 100, 1), (95, 95, 3), (61, 1, 1)]
        .into_iter()
        .enumerate()
    {
        factorize_case::<f64>(&gpu, 100 + i as u64, dims);
        factorize_case::<f32>(&gpu, 200 + i as u64, dims);
    }
}

#[test]
fn factorize_and_update_large() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let mut g = rng(7);
    let (mut gs, mut cs, mut model) = pair::<f64>(&gpu, &mut g, (4097, 1025, 1), QPolicy::Full);
    compare(&gs, &cs, &model, "factorize 4097x1025");
    // Each update on both backends and the model under `params`, then compared; a
    // column insertion's k0 is clamped to the state's n (usize::MAX appends).
    let mut step = |g: &mut StdRng,
                    kind: UpdateKind,
                    k0: usize,
                    p: usize,
                    params: UpdateParams,
                    what: &str| {
        gs.set_params(params);
        cs.set_params(params);
        let d = gs.dims();
        let k0 = if kind == UpdateKind::InsertCols {
            k0.min(d.n)
        } else {
            k0
        };
        let upd = Upd::<f64>::make(kind, g, (d.m, d.n, 1), k0, p);
        upd.apply(&mut gs).unwrap();
        upd.apply(&mut cs).unwrap();
        upd.apply_model(&mut model);
        let what = format!("{what} on {}x{} k0={k0} p={p}", d.m, d.n);
        compare(&gs, &cs, &model, &what);
    };
    let def = UpdateParams::default();
    step(&mut g, UpdateKind::InsertRows, 2000, 33, def, "insert_rows");
    step(&mut g, UpdateKind::DeleteCols, 400, 17, def, "delete_cols");
    // Column insertion with Q of ≥ 4096 rows: Q's side takes the panels' reflectors
    // merged (70 columns: 9 panels of ≤ 8 in one merge; 300 columns: 8 panels of 30,
    // then 2).
    step(&mut g, UpdateKind::InsertCols, 300, 70, def, "insert_cols");
    step(
        &mut g,
        UpdateKind::InsertCols,
        1000,
        300,
        def,
        "insert_cols",
    );
    // Row insertion whose stacked (jb + p)×jb panels pass one block's rows (p = 1100):
    // the cooperative panel, beside p = 33 above (the one-block panel).
    step(
        &mut g,
        UpdateKind::InsertRows,
        500,
        1100,
        def,
        "insert_rows",
    );
    // The strip as one blocked Householder QR of the (n + p − k0)² block with Q of
    // ≥ 4096 rows (Q's side merged), beside the Givens strips above.
    let strip = UpdateParams {
        column_strip: ColumnStrip::Householder,
        ..def
    };
    step(
        &mut g,
        UpdateKind::InsertCols,
        200,
        150,
        strip,
        "insert_cols (Householder strip)",
    );
    // A block size wider than the one-launch panel (n_b = 100: two 50-column panels
    // merged into each 100-column block) on Q of ≥ 4096 rows, appended at the end.
    let wide = UpdateParams {
        block_size: Some(100),
        ..def
    };
    step(
        &mut g,
        UpdateKind::InsertCols,
        usize::MAX,
        150,
        wide,
        "insert_cols n_b = 100",
    );
}

/// Every wired update, k0 at 0 / middle / end, p = 1 and p > 1, both policies, f32/f64.
fn updates_case<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    let dims = (300, 97, 2);
    for &kind in GPU_WIRED {
        for policy in [QPolicy::Full, QPolicy::None] {
            if needs_q(kind) && policy == QPolicy::None {
                continue;
            }
            for p in [1usize, 7] {
                let limit = kind.last_k0((dims.0, dims.1), p);
                for k0 in [0, limit / 2 + 1, limit] {
                    for params in strategies(kind) {
                        let mut g = rng(seed ^ (k0 as u64) << 8 ^ p as u64);
                        let (mut gs, mut cs, mut model) = pair::<T>(gpu, &mut g, dims, policy);
                        gs.set_params(params);
                        let upd = Upd::<T>::make(kind, &mut g, dims, k0, p);
                        let before = gpu.launch_count();
                        upd.apply(&mut gs).unwrap();
                        let launches = gpu.launch_count() - before;
                        if kind == UpdateKind::DeleteCols && k0 == limit && policy == QPolicy::Full
                        {
                            // deleting the last columns keeps R's first ones in place:
                            // no launch, copy or allocation at all (an R-only state
                            // moves the dropped rows of d into its residual norms)
                            assert_eq!(launches, 0, "delete_cols k0={k0} p={p}");
                        } else {
                            assert!(launches > 0);
                        }
                        upd.apply(&mut cs).unwrap();
                        upd.apply_model(&mut model);
                        compare(
                            &gs,
                            &cs,
                            &model,
                            &format!(
                                "{kind:?} k0={k0} p={p} {policy:?} {:?}/{:?}",
                                params.givens, params.row_removal
                            ),
                        );
                    }
                }
            }
        }
    }
}

common::gpu_tests!(common::shared_gpu => updates_case { updates_match_cpu_f64: f64 [11], updates_match_cpu_f32: f32 [12] });

/// A thin state's single-column deletion (Q₁'s columns rotated in place by the rotation
/// chain, R's block triangularised on the host): every position from the first column to
/// the one before last (the last is a truncation), ragged sizes, one and two right-hand
/// sides, then further updates on the state it leaves (a second deletion, a column and a
/// row inserted, a rank-one update), each step against the CPU backend and the model.
fn thin_column_deletion_case<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    for dims in [(300usize, 97usize, 2usize), (1037, 41, 1)] {
        let n = dims.1;
        for k0 in [0, 1, n / 2, n - 2, n - 1] {
            let mut g = rng(seed ^ (k0 as u64) << 8 ^ dims.0 as u64);
            let (mut gs, mut cs, mut model) = pair::<T>(gpu, &mut g, dims, QPolicy::Thin);
            let mut cur = dims;
            let steps = [
                (UpdateKind::DeleteCols, k0, 1),
                (UpdateKind::DeleteCols, k0 / 2, 1),
                (UpdateKind::InsertCols, k0 / 3, 2),
                (UpdateKind::InsertRows, dims.0 / 3, 3),
                (UpdateKind::RankOne, 0, 1),
            ];
            for (s, &(kind, at, p)) in steps.iter().enumerate() {
                let upd = Upd::<T>::make(kind, &mut g, cur, at, p);
                upd.apply(&mut gs).unwrap();
                upd.apply(&mut cs).unwrap();
                upd.apply_model(&mut model);
                cur = match kind {
                    UpdateKind::DeleteCols => (cur.0, cur.1 - p, cur.2),
                    UpdateKind::InsertCols => (cur.0, cur.1 + p, cur.2),
                    UpdateKind::InsertRows => (cur.0 + p, cur.1, cur.2),
                    _ => cur,
                };
                compare(
                    &gs,
                    &cs,
                    &model,
                    &format!("thin {dims:?} k0={k0} step {s} {kind:?} at {at}"),
                );
            }
        }
    }
}

common::gpu_tests!(common::shared_gpu => thin_column_deletion_case { thin_column_deletion_matches_cpu_f64: f64 [71], thin_column_deletion_matches_cpu_f32: f32 [72] });

/// A random sequence of ≥ 50 wired updates through `&mut dyn QrUpdate<T>` on both
/// backends; every step is checked (e_Q, e_A ≤ ε, R, x, residual, ‖L‖ = 0).
fn sequence<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    let mut g = rng(seed);
    // The same sequence on the CPU and on the GPU under each strategy: two-phase
    // (default), seed wavefront with the composite row removal, and seed wavefront
    // with three-stream row removal.
    let a = random_mat::<T>(&mut g, 90, 31);
    let b = random_mat::<T>(&mut g, 90, 2);
    let mut model = Model::new(&a, &b);
    let gs = StateKind::Full.gpu(gpu, &a, &b);
    let cs = StateKind::Full.cpu(&a, &b);
    let mut seed_states: Vec<Box<dyn QrUpdate<T>>> = Vec::new();
    for row_removal in [RowRemoval::Composite, RowRemoval::SeparateStreams] {
        let mut st = StateKind::Full.gpu(gpu, &a, &b);
        st.set_params(UpdateParams {
            givens: Givens::Wavefront,
            row_removal,
            ..UpdateParams::default()
        });
        seed_states.push(Box::new(st));
    }
    let mut states: Vec<Box<dyn QrUpdate<T>>> = vec![Box::new(gs), Box::new(cs)];
    states.extend(seed_states);
    for step in 0..50 {
        let (m, n, q) = (model.m(), model.n(), model.q());
        let kinds: Vec<UpdateKind> = GPU_WIRED
            .iter()
            .copied()
            .filter(|k| match k {
                UpdateKind::DeleteCols => n > 12,
                UpdateKind::DeleteRows => m > n + 12,
                UpdateKind::InsertCols => m > n + 12,
                _ => true,
            })
            .collect();
        let (upd, _, _) = Upd::<T>::random(&kinds, &mut g, (m, n, q));
        let kind = upd.kind();
        for st in states.iter_mut() {
            upd.apply(st.as_mut())
                .unwrap_or_else(|e| panic!("step {step} {kind:?}: {e}"));
        }
        upd.apply_model(&mut model);
        for (b, st) in states.iter().enumerate() {
            check_state::<T>(st.as_ref(), &model)
                .unwrap_or_else(|e| panic!("step {step} {kind:?} backend {b}: {e}"));
        }
    }
}

common::gpu_tests!(common::shared_gpu => sequence { random_sequence_f64: f64 [31], random_sequence_f32: f32 [32] });

/// The same validation errors as the CPU backend, with the GPU state unchanged bit
/// for bit (snapshots of R, d, Q before and after).
fn errors_case<T: GpuScalar>(gpu: &Arc<Gpu>) {
    let mut g = rng(41);
    let (mut gs, mut cs, _) = pair::<T>(gpu, &mut g, (40, 13, 1), QPolicy::Full);
    let (mut gn, mut cn, _) = pair::<T>(gpu, &mut g, (40, 13, 1), QPolicy::None);
    let mut nan_u = random_mat::<T>(&mut g, 2, 13);
    nan_u[(1, 4)] = T::from_f64(f64::NAN);
    // (update, also invalid on a Full state): the Q-needing ops fail only under None.
    let bad: Vec<(Upd<T>, bool)> = vec![
        (Upd::DeleteCols(0, 0), true),
        (Upd::DeleteCols(12, 2), true),
        (Upd::DeleteCols(0, 13), true),
        (
            Upd::InsertRows(41, random_mat(&mut g, 2, 13), random_mat(&mut g, 2, 1)),
            true,
        ),
        (
            Upd::InsertRows(3, random_mat(&mut g, 2, 12), random_mat(&mut g, 2, 1)),
            true,
        ),
        (
            Upd::InsertRows(3, random_mat(&mut g, 2, 13), random_mat(&mut g, 3, 1)),
            true,
        ),
        (Upd::InsertRows(3, nan_u, random_mat(&mut g, 2, 1)), true),
        (Upd::InsertCols(3, random_mat(&mut g, 40, 2)), false),
        (Upd::DeleteRows(3, 2), false),
        (
            Upd::RankOne(random_vec(&mut g, 40), random_vec(&mut g, 13)),
            false,
        ),
    ];
    for (upd, on_full) in &bad {
        let mut targets: Vec<(&mut dyn QrUpdate<T>, &mut dyn QrUpdate<T>)> =
            vec![(&mut gn, &mut cn)];
        if *on_full {
            targets.push((&mut gs, &mut cs));
        }
        for (gst, cst) in targets {
            let before = snapshot::<T>(gst);
            let eg = upd.apply(gst).err();
            let ec = upd.apply(cst).err();
            let after = snapshot::<T>(gst);
            assert!(before == after, "{upd:?}: GPU state changed on error");
            match (&eg, &ec) {
                // An op whose GPU path is still the stub fails there whatever the CPU says.
                (Some(Error::InvalidParam { why, .. }), _) if why.contains("not wired") => {}
                (Some(a), Some(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}"), "{upd:?}"),
                _ => panic!("{upd:?}: GPU {eg:?} vs CPU {ec:?}"),
            }
        }
    }
    // factorize on both backends (Full, default parameters): their errors.
    let factorize_both = |a: &Mat<T>, b: &Mat<T>| {
        let eg = GpuQr::factorize(
            gpu,
            a.as_ref(),
            b.as_ref(),
            QPolicy::Full,
            FactorParams::default(),
        )
        .err();
        let ec = CpuQr::factorize(
            a.as_ref(),
            b.as_ref(),
            QPolicy::Full,
            FactorParams::default(),
        )
        .err();
        (eg, ec)
    };
    // factorize: the same validation errors.
    let a = random_mat::<T>(&mut g, 5, 7);
    let b = random_mat::<T>(&mut g, 5, 1);
    let (eg, ec) = factorize_both(&a, &b);
    assert_eq!(format!("{eg:?}"), format!("{ec:?}"));
    // Rank deficiency: a repeated column.
    let mut a = random_mat::<T>(&mut g, 30, 6);
    for i in 0..30 {
        a[(i, 4)] = a[(i, 1)];
    }
    let b = random_mat::<T>(&mut g, 30, 1);
    let (eg, ec) = factorize_both(&a, &b);
    assert!(
        matches!(eg, Some(Error::RankDeficient { column: 4, .. })),
        "{eg:?}"
    );
    assert!(
        matches!(ec, Some(Error::RankDeficient { column: 4, .. })),
        "{ec:?}"
    );
}

#[test]
fn errors_match_cpu_state_unchanged() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    errors_case::<f64>(&gpu);
    errors_case::<f32>(&gpu);
}

/// m = 200000 with Q needs 320 GB of device memory: Error::OutOfMemory, and the
/// device stays usable.
#[test]
fn out_of_memory_then_usable() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let mut g = rng(51);
    let a = random_mat::<f64>(&mut g, 200_000, 2);
    let b = random_mat::<f64>(&mut g, 200_000, 1);
    let e = GpuQr::factorize(
        &gpu,
        a.as_ref(),
        b.as_ref(),
        QPolicy::Full,
        FactorParams::default(),
    )
    .err();
    assert!(matches!(e, Some(Error::OutOfMemory { .. })), "{e:?}");
    let (gs, cs, model) = pair::<f64>(&gpu, &mut g, (123, 45, 1), QPolicy::Full);
    compare(&gs, &cs, &model, "after OOM");
}

/// Launch counts (kernels + cuBLAS calls + memcpys, `Gpu::launch_count`) of one
/// update of each kind at m = 8000, n = 3000, p = 200, f64, Q full, under the
/// two-phase default and the seeds' wavefront designs. Printed, not asserted beyond
/// sanity: counts are a report (issue "GPU QR updating"), timings come from benches.
#[test]
fn launch_counts_8000x3000() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let mut g = rng(61);
    let (m, n, p) = (8000, 3000, 200);
    let a = random_mat::<f64>(&mut g, m, n);
    let b = random_mat::<f64>(&mut g, m, 1);
    let c0 = gpu.launch_count();
    let mut st = GpuQr::factorize(
        &gpu,
        a.as_ref(),
        b.as_ref(),
        QPolicy::Full,
        FactorParams::default(),
    )
    .unwrap();
    println!(
        "launches: factorize m={m} n={n}: {}",
        gpu.launch_count() - c0
    );
    let plans: [(&str, UpdateParams); 3] = [
        ("TwoPhase", UpdateParams::default()),
        (
            "Wavefront+Composite",
            UpdateParams {
                givens: Givens::Wavefront,
                row_removal: RowRemoval::Composite,
                ..UpdateParams::default()
            },
        ),
        (
            "Wavefront+SeparateStreams",
            UpdateParams {
                givens: Givens::Wavefront,
                row_removal: RowRemoval::SeparateStreams,
                ..UpdateParams::default()
            },
        ),
    ];
    for (name, params) in plans {
        st.set_params(params);
        let count = |what: String, st: &mut GpuQr<f64>, f: &mut dyn FnMut(&mut GpuQr<f64>)| {
            let c = gpu.launch_count();
            let t = std::time::Instant::now();
            f(st);
            gpu.synchronize().unwrap();
            let launches = gpu.launch_count() - c;
            assert!(launches > 0);
            println!(
                "launches: {name:<26} {what:<44} {launches:>7}   ({:.1} ms wall, not a benchmark)",
                t.elapsed().as_secs_f64() * 1e3
            );
        };
        // Each op starts from m = 8000, n = 3000 except where a previous op of the
        // pair moved a dimension by p (stated in the label).
        let dims = |st: &GpuQr<f64>| format!("m={} n={}", st.nrows(), st.ncols());
        let w = dims(&st);
        count(
            format!("delete_rows k0=0 p={p} at {w}"),
            &mut st,
            &mut |s| s.delete_rows(0, p).unwrap(),
        );
        let u = random_mat::<f64>(&mut g, p, n);
        let e = random_mat::<f64>(&mut g, p, 1);
        let w = dims(&st);
        count(
            format!("insert_rows k0=0 p={p} at {w}"),
            &mut st,
            &mut |s| s.insert_rows(0, u.as_ref(), e.as_ref()).unwrap(),
        );
        let w = dims(&st);
        count(
            format!("delete_cols k0=1000 p={p} at {w}"),
            &mut st,
            &mut |s| s.delete_cols(1000, p).unwrap(),
        );
        let uc = random_mat::<f64>(&mut g, m, p);
        let w = dims(&st);
        count(
            format!("insert_cols k0=0 p={p} at {w}"),
            &mut st,
            &mut |s| s.insert_cols(0, uc.as_ref()).unwrap(),
        );
        let (u1, v1) = (random_vec::<f64>(&mut g, m), random_vec::<f64>(&mut g, n));
        let w = dims(&st);
        count(format!("rank_one at {w}"), &mut st, &mut |s| {
            s.rank_one(&u1, &v1).unwrap()
        });
    }
}

/// `GpuQr::from_cpu` (pageable and page-locked) and `to_cpu_pinned`: a CPU state
/// moves to the device and back bit for bit (R, d, Q, options), an update on the
/// uploaded state matches the same update on the CPU state and the model, and a short
/// staging buffer is refused before anything is allocated (TUS/TUT).
fn upload_case<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    let dims = (333, 101, 2);
    for policy in [QPolicy::Full, QPolicy::None] {
        let mut g = rng(seed);
        let a = random_mat::<T>(&mut g, dims.0, dims.1);
        let b = random_mat::<T>(&mut g, dims.0, dims.2);
        let mut cs =
            CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default()).unwrap();
        cs.set_params(UpdateParams {
            block_size: Some(7),
            ..UpdateParams::default()
        });
        let want = snapshot::<T>(&cs);
        let len = GpuQr::<T>::staging_len(cs.dims());
        let mut staging = gpu.alloc_pinned::<T>(len).unwrap();
        // poison the staging: every element the copies use must be overwritten
        staging
            .as_mut_slice()
            .unwrap()
            .iter_mut()
            .for_each(|x| *x = T::from_f64(f64::NAN));
        let pageable = GpuQr::from_cpu(gpu, &cs, None).unwrap();
        let pinned = GpuQr::from_cpu(gpu, &cs, Some(&mut staging)).unwrap();
        for (what, st) in [("pageable", &pageable), ("pinned", &pinned)] {
            assert_eq!(snapshot::<T>(st), want, "{what} {policy:?}");
            assert_eq!(st.params(), cs.params(), "{what} {policy:?}");
            let back = st.to_cpu_pinned(&mut staging).unwrap();
            assert_eq!(snapshot::<T>(&back), want, "{what} {policy:?} back");
            assert_eq!(back.params(), cs.params());
        }
        let mut short = gpu.alloc_pinned::<T>(len - 1).unwrap();
        match GpuQr::from_cpu(gpu, &cs, Some(&mut short)) {
            Err(Error::Shape {
                what,
                got,
                expected,
                ..
            }) => {
                assert_eq!((what, got, expected), ("staging length", len - 1, len));
            }
            other => panic!("short staging: {other:?}"),
        }
        assert!(pinned.to_cpu_pinned(&mut short).is_err());
        // an update on the uploaded state follows the CPU state and the model
        let kind = if policy == QPolicy::Full {
            UpdateKind::DeleteRows
        } else {
            UpdateKind::InsertRows
        };
        let mut gs = pinned;
        let mut model = Model::new(&a, &b);
        let upd = Upd::<T>::make(kind, &mut g, dims, 40, 9);
        upd.apply(&mut gs).unwrap();
        upd.apply(&mut cs).unwrap();
        upd.apply_model(&mut model);
        compare(
            &gs,
            &cs,
            &model,
            &format!("{kind:?} after from_cpu {policy:?}"),
        );
    }
}

#[test]
fn from_cpu_round_trip_and_update() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    upload_case::<f64>(&gpu, 901);
    upload_case::<f32>(&gpu, 902);
}

/// `GpuQr::insert_cols_device`: U already on the device (a block of a NaN-padded
/// matrix) gives the update of the host entry point, checked against the CPU backend and
/// the model; its errors (a NaN or ∞ in U, named by its first entry in column order; a
/// wrong row count; p = 0; a Q-less state) come before any work and leave the state as
/// it was; `Gpu::first_non_finite` finds that entry and ignores the padding.
fn device_input_case<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    let (m, n, q) = (301, 47, 2);
    let nan = T::from_f64(f64::NAN);
    for &(k0, p) in &[(0, 5), (20, 37), (47, 3)] {
        let mut g = rng(seed + k0 as u64);
        let (mut gs, mut cs, mut model) = pair::<T>(gpu, &mut g, (m, n, q), QPolicy::Full);
        let u = random_mat::<T>(&mut g, m, p);
        let padded = |u: &Mat<T>| {
            Mat::from_fn(m + 5, p + 2, |i, j| {
                if (2..m + 2).contains(&i) && (1..=p).contains(&j) {
                    u[(i - 2, j - 1)]
                } else {
                    nan
                }
            })
        };
        let ud = cuqr::internals::gpu::DevMat::from_host(gpu, padded(&u).as_ref()).unwrap();
        let uv = ud.block(2, 1, m, p);
        assert_eq!(
            gpu.first_non_finite(&uv).unwrap(),
            None,
            "padding is outside"
        );
        // errors first: the state must not move
        let before = snapshot::<T>(&gs);
        let mut bad = u.clone();
        bad[(m - 1, p - 1)] = T::from_f64(f64::INFINITY);
        bad[(17, p / 2)] = nan;
        if p > 2 {
            bad[(200, 1)] = nan;
        }
        let bd = cuqr::internals::gpu::DevMat::from_host(gpu, padded(&bad).as_ref()).unwrap();
        let bv = bd.block(2, 1, m, p);
        // the host's answer: the first non-finite entry in column order
        let (row, col) = bad.as_ref().first_non_finite().unwrap();
        assert!(col <= p / 2);
        assert_eq!(gpu.first_non_finite(&bv).unwrap(), Some((row, col)));
        match gs.insert_cols_device(k0, &bv) {
            Err(Error::NonFinite { row: r, col: c, .. }) => assert_eq!((r, c), (row, col)),
            other => panic!("NaN in U: {other:?}"),
        }
        match gs.insert_cols_device(k0, &ud.block(2, 1, m - 1, p)) {
            Err(Error::Shape { .. }) => {}
            other => panic!("m − 1 rows: {other:?}"),
        }
        match gs.insert_cols_device(k0, &ud.block(2, 1, m, 0)) {
            Err(Error::EmptyBlock { .. }) => {}
            other => panic!("p = 0: {other:?}"),
        }
        match gs.insert_cols_device(n + 1, &uv) {
            Err(Error::OutOfRange { .. }) => {}
            other => panic!("k0 > n: {other:?}"),
        }
        assert!(
            snapshot::<T>(&gs) == before,
            "a failed update moved the state"
        );
        gs.insert_cols_device(k0, &uv).unwrap();
        cs.insert_cols(k0, u.as_ref()).unwrap();
        model.insert_cols(k0, &u);
        compare(
            &gs,
            &cs,
            &model,
            &format!("insert_cols_device k0={k0} p={p}"),
        );
    }
    let mut g = rng(seed + 99);
    let (mut gn, _, _) = pair::<T>(gpu, &mut g, (m, n, q), QPolicy::None);
    let ud = cuqr::internals::gpu::DevMat::from_host(gpu, random_mat::<T>(&mut g, m, 2).as_ref())
        .unwrap();
    match gn.insert_cols_device(3, &ud.view()) {
        Err(Error::NeedsData { .. }) => {}
        other => panic!("Q-less state: {other:?}"),
    }
}

#[test]
fn insert_cols_device_matches_cpu() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    device_input_case::<f64>(&gpu, 901);
    device_input_case::<f32>(&gpu, 902);
}

/// A column of `x` inside a NaN-filled (rows + 3)×3 device matrix (rows 1.., column 1),
/// so that a read past the view shows.
fn padded_col<T: GpuScalar>(gpu: &Arc<Gpu>, x: &[T]) -> cuqr::internals::gpu::DevMat<T> {
    let nan = T::from_f64(f64::NAN);
    let h = Mat::from_fn(x.len() + 3, 3, |i, j| {
        if j == 1 && (1..=x.len()).contains(&i) {
            x[i - 1]
        } else {
            nan
        }
    });
    cuqr::internals::gpu::DevMat::from_host(gpu, h.as_ref()).unwrap()
}

/// `GpuQr::rank_one_device`: u and v already on the device (columns of NaN-padded
/// matrices) give the update of the host entry point in every kind, checked against the
/// CPU backend and the model, for a u well outside range(A) and one inside it (the thin
/// kind's projected path, the R-only kind's missing direction); its errors (NaN or ∞ in u
/// or v, with the entry; u or v of the wrong shape; an R-only state without data) come
/// before any work and leave the state as it was.
fn rank_one_device_case<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    let (m, n, q) = (263, 41, 2);
    for kind in common::ALL_KINDS {
        let mut g = rng(seed + kind as u64);
        let a = random_mat::<T>(&mut g, m, n);
        let b = random_mat::<T>(&mut g, m, q);
        let mut gs = kind.gpu(gpu, &a, &b);
        let mut cs = kind.cpu(&a, &b);
        let mut model = Model::new(&a, &b);
        let outside = random_vec::<T>(&mut g, m);
        // u = A·c lies in range(A): no new direction; |vᵀc| ≤ 1/4 keeps A(I + c vᵀ) as
        // well conditioned as A
        let c: Vec<T> = random_vec::<T>(&mut g, n)
            .into_iter()
            .map(|x| x * T::from_f64(1.0 / n as f64))
            .collect();
        let inside: Vec<T> = (0..m)
            .map(|i| (0..n).map(|j| a[(i, j)] * c[j]).sum::<T>())
            .collect();
        for (what, u) in [("u outside", outside), ("u inside", inside)] {
            let v: Vec<T> = random_vec::<T>(&mut g, n)
                .into_iter()
                .map(|x| x * T::from_f64(0.25))
                .collect();
            let (ud, vd) = (padded_col(gpu, &u), padded_col(gpu, &v));
            let (uv, vv) = (ud.block(1, 1, m, 1), vd.block(1, 1, n, 1));
            let before = snapshot::<T>(&gs);
            if !kind.capable() {
                match gs.rank_one_device(&uv, &vv) {
                    Err(Error::NeedsData { .. }) => {}
                    other => panic!("{kind:?}: R-only state without data: {other:?}"),
                }
                assert!(snapshot::<T>(&gs) == before, "{kind:?}: a refusal moved it");
                break;
            }
            let mut bad = u.clone();
            bad[m - 2] = T::from_f64(f64::INFINITY);
            bad[70] = T::from_f64(f64::NAN);
            let bd = padded_col(gpu, &bad);
            match gs.rank_one_device(&bd.block(1, 1, m, 1), &vv) {
                Err(Error::NonFinite {
                    what: "u",
                    row: 70,
                    col: 0,
                    ..
                }) => {}
                other => panic!("{kind:?}: NaN in u: {other:?}"),
            }
            let mut badv = v.clone();
            badv[n - 1] = T::from_f64(f64::NEG_INFINITY);
            let bvd = padded_col(gpu, &badv);
            match gs.rank_one_device(&uv, &bvd.block(1, 1, n, 1)) {
                Err(Error::NonFinite { what: "v", row, .. }) => assert_eq!(row, n - 1),
                other => panic!("{kind:?}: ∞ in v: {other:?}"),
            }
            for (ub, vb) in [
                (ud.block(1, 1, m - 1, 1), vd.block(1, 1, n, 1)),
                (ud.block(1, 1, m, 2), vd.block(1, 1, n, 1)),
                (ud.block(1, 1, m, 1), vd.block(1, 1, n + 1, 1)),
                (ud.block(1, 1, m, 1), vd.block(1, 1, n, 0)),
            ] {
                match gs.rank_one_device(&ub, &vb) {
                    Err(Error::Shape { .. }) => {}
                    other => panic!(
                        "{kind:?}: u {}×{}, v {}×{}: {other:?}",
                        ub.nrows(),
                        ub.ncols(),
                        vb.nrows(),
                        vb.ncols()
                    ),
                }
            }
            assert!(snapshot::<T>(&gs) == before, "{kind:?}: a refusal moved it");
            gs.rank_one_device(&uv, &vv).unwrap();
            cs.rank_one(&u, &v).unwrap();
            model.rank_one(&u, &v);
            check_state::<T>(&gs, &model)
                .unwrap_or_else(|e| panic!("{kind:?} {what}: GPU vs model: {e}"));
            let (rg, rc) = (gs.r().unwrap(), cs.r().unwrap());
            check_r_matches(&rg, &rc, &model.a)
                .unwrap_or_else(|e| panic!("{kind:?} {what}: GPU R vs CPU R: {e}"));
        }
    }
}

#[test]
fn rank_one_device_matches_cpu() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    rank_one_device_case::<f64>(&gpu, 1301);
    rank_one_device_case::<f32>(&gpu, 1302);
}

/// Tall states (m ≥ 65,536 rows), where Q₁ᵀU, UᵀU and Uᵀb (and the R-only kind's AᵀU)
/// take the row-chunked narrow kernel: column insertion with p = 1 and p = 8 (the 4×8
/// tiles) and rank-one updates from host and device vectors, in the thin and R-only
/// kinds, against the CPU backend and the model.
fn tall_case<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64) {
    let (m, n, q) = (70_001, 29, 2);
    for kind in [StateKind::Thin, StateKind::NoneKeep] {
        let mut g = rng(seed + kind as u64);
        let a = random_mat::<T>(&mut g, m, n);
        let b = random_mat::<T>(&mut g, m, q);
        let mut gs = kind.gpu(gpu, &a, &b);
        let mut cs = kind.cpu(&a, &b);
        let mut model = Model::new(&a, &b);
        let check = |gs: &GpuQr<T>, cs: &CpuQr<T>, model: &Model, what: &str| {
            check_state::<T>(gs, model)
                .unwrap_or_else(|e| panic!("{kind:?} {what}: GPU vs model: {e}"));
            check_r_matches(&gs.r().unwrap(), &cs.r().unwrap(), &model.a)
                .unwrap_or_else(|e| panic!("{kind:?} {what}: GPU R vs CPU R: {e}"));
        };
        for (k0, p) in [(11, 1), (3, 8)] {
            let u = random_mat::<T>(&mut g, m, p);
            let ud = cuqr::internals::gpu::DevMat::from_host(gpu, u.as_ref()).unwrap();
            gs.insert_cols_device(k0, &ud.view()).unwrap();
            cs.insert_cols(k0, u.as_ref()).unwrap();
            model.insert_cols(k0, &u);
            check(&gs, &cs, &model, &format!("insert_cols k0={k0} p={p}"));
        }
        let half = |x: Vec<T>| -> Vec<T> { x.into_iter().map(|e| e * T::from_f64(0.5)).collect() };
        let (u, v) = (
            random_vec::<T>(&mut g, m),
            half(random_vec::<T>(&mut g, gs.ncols())),
        );
        gs.rank_one(&u, &v).unwrap();
        cs.rank_one(&u, &v).unwrap();
        model.rank_one(&u, &v);
        check(&gs, &cs, &model, "rank_one");
        let (u, v) = (
            random_vec::<T>(&mut g, m),
            half(random_vec::<T>(&mut g, gs.ncols())),
        );
        let ud = cuqr::internals::gpu::DevMat::from_host(gpu, Mat::from_col(&u).as_ref()).unwrap();
        let vd = cuqr::internals::gpu::DevMat::from_host(gpu, Mat::from_col(&v).as_ref()).unwrap();
        gs.rank_one_device(&ud.view(), &vd.view()).unwrap();
        cs.rank_one(&u, &v).unwrap();
        model.rank_one(&u, &v);
        check(&gs, &cs, &model, "rank_one_device");
    }
}

#[test]
fn tall_updates_take_the_narrow_products() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    tall_case::<f64>(&gpu, 1401);
    tall_case::<f32>(&gpu, 1402);
}
