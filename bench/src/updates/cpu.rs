//! The CPU columns: (c) the serial CPU update and (d) faer's refactorisation, timed
//! on worker threads beside the GPU measurements.

use std::sync::Arc;
use std::time::Instant;

use cuqr::{CpuQr, Mat, QrUpdate, Scalar};

use super::case::{apply, case_seed, make_case, point_params, Case};
use super::grid::Point;
use super::types::Row;
use crate::stats::upper_median;

/// Times `run`: at least one run, more while `budget_s` seconds last (up to 5). `run`
/// does its own untimed set-up and returns the milliseconds of its timed part.
/// Returns (median ms, runs).
fn time_in_budget<E>(
    budget_s: f64,
    mut run: impl FnMut() -> Result<f64, E>,
) -> Result<(f64, usize), E> {
    let mut samples = Vec::new();
    let t_all = Instant::now();
    while samples.len() < 5 && (samples.is_empty() || t_all.elapsed().as_secs_f64() < budget_s) {
        samples.push(run()?);
    }
    let runs = samples.len();
    Ok((upper_median(samples), runs))
}

/// Times the serial CPU update (+ solve) from `base` ([`time_in_budget`]'s
/// repetitions). Returns (median ms, runs).
pub(super) fn time_cpu<T: Scalar>(
    base: &CpuQr<T>,
    pt: &Point,
    c: &Case<T>,
    budget_s: f64,
) -> cuqr::Result<(f64, usize)> {
    time_in_budget(budget_s, || {
        let mut st = base.clone();
        st.set_params(point_params(pt, st.params()));
        let t = Instant::now();
        // (c) is the serial update: the reference algorithms, not the blocked default.
        cuqr::cpu::reference::run(|| apply(&mut st, pt, c))?;
        let sol = st.solve()?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        std::hint::black_box(sol);
        Ok(ms)
    })
}

/// Times baseline (d): faer's QR of the updated matrix plus its least-squares
/// solve, sequential (faer without rayon), in the working precision; conversion to
/// faer's matrix type is outside the timed region. Same repetition rule as
/// [`time_in_budget`]. Returns (median ms, runs).
pub(super) fn time_faer<T: Scalar>(c: &Case<T>, budget_s: f64) -> (f64, usize) {
    fn run<F: faer::traits::RealField + Copy>(
        a: &faer::Mat<F>,
        b: &faer::Mat<F>,
        budget_s: f64,
    ) -> (f64, usize) {
        use faer::linalg::solvers::SolveLstsq;
        let timed = time_in_budget(budget_s, || {
            let t = Instant::now();
            let x = a.qr().solve_lstsq(b);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            std::hint::black_box(x);
            Ok::<f64, std::convert::Infallible>(ms)
        });
        timed.unwrap_or_else(|never| match never {})
    }
    // faer's own default with its rayon feature is every core; (d) stays sequential.
    faer::set_global_parallelism(faer::Par::Seq);
    let (a, b) = (&c.a_new, &c.b_new);
    if T::NAME == "f32" {
        let fa = faer::Mat::<f32>::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64() as f32);
        let fb = faer::Mat::<f32>::from_fn(b.nrows(), b.ncols(), |i, j| b[(i, j)].to_f64() as f32);
        run(&fa, &fb, budget_s)
    } else {
        let fa = faer::Mat::<f64>::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64());
        let fb = faer::Mat::<f64>::from_fn(b.nrows(), b.ncols(), |i, j| b[(i, j)].to_f64());
        run(&fa, &fb, budget_s)
    }
}

/// What a CPU job gives: ((serial update ms, runs), (faer ms, runs)).
pub(super) type CpuTimed = cuqr::Result<((f64, usize), (f64, usize))>;

/// One CPU point: its factorised state, the state's A and b, and its row's slot.
pub(super) struct CpuJob<T: Scalar> {
    pub(super) base: Arc<CpuQr<T>>,
    pub(super) a: Arc<Mat<T>>,
    pub(super) b: Arc<Mat<T>>,
    pub(super) seed: u64,
    pub(super) pt: Point,
    pub(super) slot: usize,
}

/// The CPU columns (c) and (d) of the points that ask for them, on `threads` worker
/// threads that run beside the GPU measurements: each point serial on one thread with
/// its own copy of the state.
pub(super) struct CpuPool<T: Scalar> {
    tx: Option<std::sync::mpsc::Sender<CpuJob<T>>>,
    workers: Vec<std::thread::JoinHandle<()>>,
    done: Arc<std::sync::Mutex<Vec<(usize, CpuTimed)>>>,
}

impl<T: Scalar + 'static> CpuPool<T> {
    pub(super) fn new(threads: usize, budget_s: f64) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<CpuJob<T>>();
        let rx = Arc::new(std::sync::Mutex::new(rx));
        let done = Arc::new(std::sync::Mutex::new(Vec::new()));
        let workers = (0..threads.max(1))
            .map(|_| {
                let (rx, done) = (rx.clone(), done.clone());
                std::thread::spawn(move || loop {
                    let job = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok(j) = job else { break };
                    let case = make_case(&j.pt, &j.a, &j.b, case_seed(j.seed, &j.pt));
                    let r = time_cpu(&j.base, &j.pt, &case, budget_s)
                        .map(|c| (c, time_faer(&case, budget_s)));
                    drop(case);
                    done.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((j.slot, r));
                })
            })
            .collect();
        CpuPool {
            tx: Some(tx),
            workers,
            done,
        }
    }

    pub(super) fn submit(&self, job: CpuJob<T>) {
        self.tx
            .as_ref()
            .expect("the pool takes jobs until finish")
            .send(job)
            .expect("the workers live until finish");
    }

    /// The jobs finished so far (each once).
    pub(super) fn take_done(&self) -> Vec<(usize, CpuTimed)> {
        std::mem::take(&mut *self.done.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Waits for every job; returns the ones not yet taken.
    pub(super) fn finish(mut self) -> Vec<(usize, CpuTimed)> {
        drop(self.tx.take());
        for w in self.workers.drain(..) {
            w.join().expect("a CPU worker panicked");
        }
        self.take_done()
    }
}

/// Fills a row's CPU columns from a finished job.
pub(super) fn fill_cpu(row: &mut Row, timed: CpuTimed) -> cuqr::Result<()> {
    let ((cpu_ms, cpu_runs), (faer_ms, faer_runs)) = timed?;
    row.cpu_ms = Some(cpu_ms);
    row.cpu_runs = cpu_runs;
    row.faer_ms = Some(faer_ms);
    row.faer_runs = faer_runs;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::case::random;
    use super::super::grid::Kind;
    use super::*;
    use cuqr::{FactorParams, QPolicy};

    /// The CPU pool on several threads fills exactly the CPU points' columns, and a
    /// failing CPU update is reported, not swallowed.
    #[test]
    fn cpu_pool_fills_the_cpu_points() {
        use Kind::*;
        let (m, n) = (90, 30);
        let pts = [
            Point::new("t", InsertRows, m, n, 0, 4).cpu(),
            Point::new("t", DeleteCols, m, n, 3, 2),
            Point::new("t", DeleteCols, m, n, 10, 5).cpu(),
            Point::new("t", InsertRows, m, n, 7, 3).cpu(),
            Point::new("t", DeleteCols, m, n, 29, 5).cpu(),
        ];
        let a = Arc::new(random::<f64>(m, n, 1));
        let b = Arc::new(random::<f64>(m, 1, 2));
        let base = Arc::new(
            CpuQr::factorize(
                a.as_ref().as_ref(),
                b.as_ref().as_ref(),
                QPolicy::None,
                FactorParams::default(),
            )
            .unwrap(),
        );
        for threads in [1, 3, 8] {
            let pool = CpuPool::<f64>::new(threads, 0.0);
            for (slot, p) in pts.iter().enumerate().filter(|(_, p)| p.cpu) {
                pool.submit(CpuJob {
                    base: base.clone(),
                    a: a.clone(),
                    b: b.clone(),
                    seed: 5,
                    pt: *p,
                    slot,
                });
            }
            let mut got = pool.finish();
            got.sort_by_key(|x| x.0);
            let slots: Vec<usize> = got.iter().map(|x| x.0).collect();
            assert_eq!(slots, [0, 2, 3, 4], "{threads} threads");
            for (slot, timed) in got {
                let mut r = Row::default();
                let res = fill_cpu(&mut r, timed);
                if slot == 4 {
                    // k0 + p > n: the update's validation error comes back
                    assert!(res.is_err());
                    assert!(r.cpu_ms.is_none());
                } else {
                    res.unwrap();
                    assert!(r.cpu_ms.is_some_and(|t| t.is_finite() && t >= 0.0));
                    assert!(r.faer_ms.is_some() && r.cpu_runs >= 1 && r.faer_runs >= 1);
                }
            }
        }
    }
}
