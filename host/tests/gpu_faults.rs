//! Injected device faults (feature `fault-injection`, on in the library's tests): for
//! every operation on every state kind, each device allocation, each cuBLAS/cuSOLVER call
//! and each kernel launch that the operation makes fails in turn. After every fault the
//! operation must return a typed device error, leave the state bit for bit as it was
//! (or poisoned, with the clone taken before as the way back), give back every byte of
//! device memory it took, and the same call must then work and agree with the run that
//! had no fault. The guarantees are tabled in docs/reliability.md.
//!
//! `CUQR_FAULT_SWEEP=full` sweeps every fault point; the default takes every point of
//! the first 24 and a spread of the rest (the full sweep runs on the GPU machine).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{StateKind, ALL_KINDS};
use cuqr::fault::{self, FaultPoint};
use cuqr::{Error, Gpu, GpuQr, Mat, QrUpdate, UpdateParams};
use rand::rngs::StdRng;

const POINTS: [FaultPoint; 3] = [FaultPoint::Alloc, FaultPoint::Library, FaultPoint::Launch];
const M: usize = 37;
const N: usize = 9;
const Q: usize = 2;

/// The operands of every operation, drawn once.
struct Inputs {
    a: Mat<f64>,
    b: Mat<f64>,
    cols: Mat<f64>,
    rows: Mat<f64>,
    rows_rhs: Mat<f64>,
    u: Vec<f64>,
    v: Vec<f64>,
    uk: Mat<f64>,
    vk: Mat<f64>,
    /// Rows 6 and 7 of A and b, as `delete_rows_with` is given them.
    leaving: Mat<f64>,
    leaving_rhs: Mat<f64>,
}

impl Inputs {
    fn draw(rng: &mut StdRng) -> Self {
        let a = common::random_mat(rng, M, N);
        let b = common::random_mat(rng, M, Q);
        Self {
            leaving: Mat::from_fn(2, N, |i, j| a.col(j)[6 + i]),
            leaving_rhs: Mat::from_fn(2, Q, |i, j| b.col(j)[6 + i]),
            a,
            b,
            cols: common::random_mat(rng, M, 2),
            rows: common::random_mat(rng, 3, N),
            rows_rhs: common::random_mat(rng, 3, Q),
            u: common::random_vec(rng, M),
            v: common::random_vec(rng, N),
            uk: common::random_mat(rng, M, 2),
            vk: common::random_mat(rng, N, 2),
        }
    }
}

type Call = fn(&mut GpuQr<f64>, &Inputs) -> Result<(), Error>;

/// Every verb once, with arguments every kind can take where its data allow.
const CALLS: [(&str, Call); 13] = [
    ("insert_cols", |s, x| s.insert_cols(3, x.cols.as_ref())),
    ("delete_cols", |s, _| s.delete_cols(2, 2)),
    ("insert_rows", |s, x| {
        s.insert_rows(5, x.rows.as_ref(), x.rows_rhs.as_ref())
    }),
    ("delete_rows", |s, _| s.delete_rows(4, 3)),
    ("delete_rows_with", |s, x| {
        s.delete_rows_with(6, x.leaving.as_ref(), x.leaving_rhs.as_ref())
    }),
    ("rank_one", |s, x| s.rank_one(&x.u, &x.v)),
    ("rank_k", |s, x| s.rank_k(x.uk.as_ref(), x.vk.as_ref())),
    ("replace_cols", |s, x| s.replace_cols(1, x.cols.as_ref())),
    ("shift_col", |s, _| s.shift_col(1, 6)),
    ("slide", |s, x| {
        s.slide(x.rows.as_ref(), x.rows_rhs.as_ref(), 3)
    }),
    ("slide_forget", |s, x| {
        s.set_params(UpdateParams {
            forget: 0.98,
            ..s.params()
        });
        s.slide(x.rows.as_ref(), x.rows_rhs.as_ref(), 3)
    }),
    ("check_drift", |s, _| s.check_drift().map(|_| ())),
    ("solve", |s, _| s.solve().map(|_| ())),
];

/// R, d, Q and the kept data, bit for bit, and the dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Snapshot {
    dims: (usize, usize, usize),
    parts: Vec<(usize, usize, Vec<u64>)>,
}

fn bits(a: &Mat<f64>) -> (usize, usize, Vec<u64>) {
    let v = a.as_slice().iter().map(|x| x.to_bits()).collect();
    (a.nrows(), a.ncols(), v)
}

fn snapshot(s: &GpuQr<f64>, g: &Gpu) -> Snapshot {
    let mut parts = vec![bits(&s.r().unwrap()), bits(&s.d().unwrap())];
    if let Some(q) = s.q().unwrap() {
        parts.push(bits(&q));
    }
    for kept in [s.a_dev(), s.b_dev()].into_iter().flatten() {
        parts.push(bits(&kept.to_host(g).unwrap()));
    }
    Snapshot {
        dims: (s.nrows(), s.ncols(), s.nrhs()),
        parts,
    }
}

/// The largest entry-wise difference between two snapshots of one shape, relative to
/// the largest entry; `None` when the shapes differ.
fn rel_diff(x: &Snapshot, y: &Snapshot) -> Option<f64> {
    if x.dims != y.dims || x.parts.len() != y.parts.len() {
        return None;
    }
    let mut worst = 0.0f64;
    for (p, q) in x.parts.iter().zip(&y.parts) {
        if (p.0, p.1) != (q.0, q.1) {
            return None;
        }
        let scale =
            p.2.iter()
                .map(|w| f64::from_bits(*w).abs())
                .fold(1.0, f64::max);
        for (a, b) in p.2.iter().zip(&q.2) {
            worst = worst.max((f64::from_bits(*a) - f64::from_bits(*b)).abs() / scale);
        }
    }
    Some(worst)
}

fn is_device_error(e: &Error) -> bool {
    matches!(
        e,
        Error::OutOfMemory { .. } | Error::Driver(_) | Error::Cublas(_) | Error::Cusolver(_)
    )
}

/// Which ordinals of a point with `count` events to inject.
fn ordinals(count: u64, full: bool) -> Vec<u64> {
    if full || count <= 24 {
        return (0..count).collect();
    }
    let mut v: Vec<u64> = (0..24).collect();
    let rest = count - 24;
    v.extend((1..=8).map(|i| 24 + i * rest / 9));
    v.dedup();
    v
}

/// What the sweep saw, per operation × kind × point.
#[derive(Default)]
struct Tally {
    /// Faults injected.
    injected: u64,
    /// Errors with the state bit for bit unchanged.
    unchanged: u64,
    /// Errors that poisoned the state.
    poisoned: u64,
    /// Faults the operation absorbed (it returned Ok with the right result).
    absorbed: u64,
}

struct Sweep<'g> {
    gpu: &'g Arc<Gpu>,
    x: &'g Inputs,
    full: bool,
    table: BTreeMap<(&'static str, StateKind, String), Tally>,
    defects: Vec<String>,
}

impl Sweep<'_> {
    fn fresh(&self, kind: StateKind) -> GpuQr<f64> {
        GpuQr::factorize(
            self.gpu,
            self.x.a.as_ref(),
            self.x.b.as_ref(),
            kind.policy(),
            kind.params(),
        )
        .expect("the test problem factorises")
    }

    fn defect(&mut self, what: String) {
        eprintln!("DEFECT {what}");
        self.defects.push(what);
    }

    /// Sweeps one call on one kind; false when the kind refuses the call without a fault.
    fn call(&mut self, name: &'static str, call: Call, kind: StateKind) -> bool {
        let base = self.fresh(kind);
        let before = snapshot(&base, self.gpu);
        // A first run fills the device's caches (workspaces kept between calls), so that
        // the counted run and the injected ones take the same path.
        let mut warm = base.try_clone().unwrap();
        if call(&mut warm, self.x).is_err() {
            return false;
        }
        drop(warm);
        // The run without a fault: the reference.
        let mut clean = base.try_clone().unwrap();
        fault::count();
        let out = call(&mut clean, self.x);
        let (counts, _) = fault::disarm();
        if out.is_err() {
            return false;
        }
        let want = snapshot(&clean, self.gpu);
        drop(clean);
        for point in POINTS {
            for nth in ordinals(counts.of(point), self.full) {
                self.inject(name, call, kind, (point, nth), (&base, &before, &want));
            }
        }
        true
    }

    fn inject(
        &mut self,
        name: &'static str,
        call: Call,
        kind: StateKind,
        (point, nth): (FaultPoint, u64),
        (base, before, want): (&GpuQr<f64>, &Snapshot, &Snapshot),
    ) {
        let at = format!("{name} on {kind:?}, {point:?} #{nth}");
        let mut st = base.try_clone().unwrap();
        let level = self.gpu.memory_in_use().unwrap();
        fault::arm(point, nth);
        let out = call(&mut st, self.x);
        let (_, fired) = fault::disarm();
        let tally = self
            .table
            .entry((name, kind, format!("{point:?}")))
            .or_default();
        if !fired {
            // The call took another path than the counting run (it must not).
            return self.defect(format!("{at}: the fault point was not reached"));
        }
        tally.injected += 1;
        match out {
            Ok(()) => {
                tally.absorbed += 1;
                let got = snapshot(&st, self.gpu);
                match rel_diff(&got, want) {
                    Some(d) if d <= 1e-12 => {}
                    d => self.defect(format!("{at}: absorbed, but the result differs ({d:?})")),
                }
                return;
            }
            Err(e) if !is_device_error(&e) => {
                return self.defect(format!("{at}: not a device error: {e}"));
            }
            Err(_) => {}
        }
        if st.is_poisoned() {
            tally.poisoned += 1;
            match call(&mut st, self.x) {
                Err(Error::Poisoned) => {}
                other => self.defect(format!("{at}: poisoned, then {other:?}")),
            }
            // The way back: the clone taken before the call.
            st = base.try_clone().unwrap();
        } else {
            tally.unchanged += 1;
            if snapshot(&st, self.gpu) != *before {
                return self.defect(format!("{at}: refused, but the state changed"));
            }
        }
        if self.gpu.memory_in_use().unwrap() != level {
            let now = self.gpu.memory_in_use().unwrap();
            self.defect(format!("{at}: device memory {level:?} → {now:?} bytes"));
        }
        match call(&mut st, self.x) {
            Ok(()) => match rel_diff(&snapshot(&st, self.gpu), want) {
                Some(d) if d <= 1e-12 => {}
                d => self.defect(format!("{at}: the next call differs ({d:?})")),
            },
            Err(e) => self.defect(format!("{at}: the next call failed: {e}")),
        }
    }

    /// Factorisation itself: every fault gives a typed error and leaks nothing.
    fn factorize(&mut self, kind: StateKind) {
        drop(self.fresh(kind)); // caches
        fault::count();
        drop(self.fresh(kind));
        let (counts, _) = fault::disarm();
        for point in POINTS {
            for nth in ordinals(counts.of(point), self.full) {
                let at = format!("factorize on {kind:?}, {point:?} #{nth}");
                let level = self.gpu.memory_in_use().unwrap();
                fault::arm(point, nth);
                let out = GpuQr::factorize(
                    self.gpu,
                    self.x.a.as_ref(),
                    self.x.b.as_ref(),
                    kind.policy(),
                    kind.params(),
                );
                let (_, fired) = fault::disarm();
                let tally = self
                    .table
                    .entry(("factorize", kind, format!("{point:?}")))
                    .or_default();
                tally.injected += u64::from(fired);
                match out {
                    Ok(_) if fired => tally.absorbed += 1,
                    Ok(_) => self.defect(format!("{at}: the fault point was not reached")),
                    Err(e) if is_device_error(&e) => tally.unchanged += 1,
                    Err(e) => self.defect(format!("{at}: not a device error: {e}")),
                }
                if self.gpu.memory_in_use().unwrap() != level {
                    self.defect(format!("{at}: device memory not given back"));
                }
            }
        }
    }
}

#[test]
fn every_fault_point_of_every_operation_is_survived() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    if gpu.memory_in_use().unwrap().is_none() {
        eprintln!("skipped: the device has no stream-ordered allocator to measure leaks with");
        return;
    }
    let x = Inputs::draw(&mut common::rng(0xFA17));
    let full = std::env::var("CUQR_FAULT_SWEEP").as_deref() == Ok("full");
    let mut sweep = Sweep {
        gpu: &gpu,
        x: &x,
        full,
        table: BTreeMap::new(),
        defects: Vec::new(),
    };
    let mut refused = Vec::new();
    for kind in ALL_KINDS {
        sweep.factorize(kind);
        for (name, call) in CALLS {
            if !sweep.call(name, call, kind) {
                refused.push(format!("{name} on {kind:?}"));
            }
        }
    }
    println!("operation        kind      point    injected unchanged poisoned absorbed");
    for ((name, kind, point), t) in &sweep.table {
        println!(
            "{name:<16} {:<9} {point:<8} {:>8} {:>9} {:>8} {:>8}",
            format!("{kind:?}"),
            t.injected,
            t.unchanged,
            t.poisoned,
            t.absorbed
        );
    }
    let total: u64 = sweep.table.values().map(|t| t.injected).sum();
    println!("{total} faults injected; calls a kind refuses without a fault: {refused:?}");
    assert!(total > 0, "no fault point was reached");
    assert!(
        sweep.defects.is_empty(),
        "{} defects, first: {}",
        sweep.defects.len(),
        sweep.defects[0]
    );
}
