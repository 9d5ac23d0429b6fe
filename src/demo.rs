//! `cuqr demo`: a regression run on synthetic data. Each update (column and
//! row insertion and deletion, the rank-one update) is timed against refactorising
//! the updated matrix from scratch on the same backend, and checked with e_x and
//! e_A (docs/algorithms.md#accuracy-measures).

use std::time::Instant;

use cuqr::{Mat, QPolicy, QrUpdate, Scalar};

use crate::backend::{self, Backend, Choice};
use crate::ops::Update;
use cuqr::GpuScalar;
use cuqr_cli::cli::{self, CliResult, Precision};
use cuqr_cli::rng::Rng;

const OPTIONS: &[&str] = &["backend", "precision", "seed", "size", "threads"];

/// Problem sizes of one demo run (none a multiple of 32).
#[derive(Clone, Copy, Debug)]
struct Sizes {
    m: usize,
    n: usize,
    add_rows: usize,
    add_cols: usize,
    del_rows: usize,
}

/// 2500×250: each of the six refactorisations to the thin Q₁ costs ≈ 4mn² flops
/// (the demo's running state is thin too).
const DEFAULT: Sizes = Sizes {
    m: 2500,
    n: 250,
    add_rows: 150,
    add_cols: 7,
    del_rows: 60,
};

/// The default session on the GPU backend: the same steps at 6000×600.
const DEFAULT_GPU: Sizes = Sizes {
    m: 6000,
    n: 600,
    add_rows: 300,
    add_cols: 11,
    del_rows: 150,
};

const SMALL: Sizes = Sizes {
    m: 241,
    n: 29,
    add_rows: 23,
    add_cols: 3,
    del_rows: 17,
};

/// Noise standard deviation in y = Xβ + σ·ε.
const SIGMA: f64 = 0.1;

/// Runs `cuqr demo` with the arguments after the command name.
pub fn run(args: &[String]) -> CliResult<()> {
    let Some(opts) = cli::parse_or_help("demo", args, OPTIONS, crate::help::DEMO_HELP)? else {
        return Ok(());
    };
    let choice = Choice::parse(opts.get("backend").unwrap_or("auto"))?;
    let precision = Precision::from_opt(opts.get("precision"))?;
    opts.apply_threads()?;
    let seed = opts.u64("seed")?.unwrap_or(42);
    let (backend, note) = backend::resolve(choice)?;
    let sizes = match (opts.get("size"), &backend) {
        (None | Some("default"), Backend::Gpu(_)) => DEFAULT_GPU,
        (None | Some("default"), Backend::Cpu { .. }) => DEFAULT,
        (Some("small"), _) => SMALL,
        (Some(s), _) => return Err(format!("--size must be small or default, not '{s}'").into()),
    };
    match note {
        Some(why) => println!("backend: {backend} (auto: {why})"),
        None => println!("backend: {backend}"),
    }
    match precision {
        Precision::F64 => session::<f64>(backend, seed, sizes),
        Precision::F32 => session::<f32>(backend, seed, sizes),
    }
}

/// What the data generator knows about one column of X.
#[derive(Clone, Copy, Debug)]
struct Variable {
    /// Standard deviation of the variable's values.
    scale: f64,
    /// Its true coefficient.
    beta: f64,
}

/// `k` new observations (rows of X and entries of y) of the variables `vars`.
fn observations<T: Scalar>(rng: &mut Rng, vars: &[Variable], k: usize) -> (Mat<T>, Mat<T>) {
    let x = Mat::<f64>::from_fn(k, vars.len(), |_, j| vars[j].scale * rng.normal());
    let y = Mat::from_fn(k, 1, |i, _| {
        let mean: f64 = vars
            .iter()
            .enumerate()
            .map(|(j, v)| v.beta * x[(i, j)])
            .sum();
        mean + SIGMA * rng.normal()
    });
    let cast = |a: &Mat<f64>| Mat::from_fn(a.nrows(), a.ncols(), |i, j| T::from_f64(a[(i, j)]));
    (cast(&x), cast(&y))
}

/// e_A = ‖QR − A‖_F/‖A‖_F in f64 (docs/algorithms.md#accuracy-measures), using that R
/// is upper trapezoidal.
fn e_a<T: Scalar>(qr: &dyn QrUpdate<T>, a: &Mat<T>) -> CliResult<Option<f64>> {
    let Some(q) = qr.q()? else {
        return Ok(None);
    };
    let r = qr.r()?;
    let (m, n) = (a.nrows(), a.ncols());
    let mut ssq = 0.0f64;
    let mut col = vec![0.0f64; m];
    for j in 0..n {
        col.iter_mut()
            .enumerate()
            .for_each(|(i, c)| *c = -a[(i, j)].to_f64());
        for k in 0..=j.min(m - 1) {
            let rkj = r[(k, j)].to_f64();
            for (c, qik) in col.iter_mut().zip(q.col(k)) {
                *c = qik.to_f64().mul_add(rkj, *c);
            }
        }
        ssq += col.iter().map(|c| c * c).sum::<f64>();
    }
    Ok(Some(ssq.sqrt() / a.norm_fro()))
}

fn rel_diff<T: Scalar>(x: &Mat<T>, y: &Mat<T>) -> f64 {
    let mut num = 0.0f64;
    let mut den = 0.0f64;
    for (a, b) in x.as_slice().iter().zip(y.as_slice()) {
        num += (a.to_f64() - b.to_f64()).powi(2);
        den += b.to_f64().powi(2);
    }
    (num / den).sqrt()
}

struct Table;

impl Table {
    fn header() {
        println!(
            "{:<26} {:>11} {:>10} {:>12} {:>9} {:>12} {:>9} {:>9}",
            "step", "m x n", "update ms", "refactor ms", "speed-up", "residual", "e_x", "e_A"
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn row(
        step: &str,
        m: usize,
        n: usize,
        upd: Option<f64>,
        fresh: f64,
        resid: f64,
        ex: Option<f64>,
        ea: Option<f64>,
    ) {
        let dash = |x: Option<String>| x.unwrap_or_else(|| "-".to_string());
        println!(
            "{:<26} {:>11} {:>10} {:>12.2} {:>9} {:>12.6} {:>9} {:>9}",
            step,
            format!("{m} x {n}"),
            dash(upd.map(|u| format!("{u:.2}"))),
            fresh,
            dash(upd.map(|u| format!("{:.1}x", fresh / u))),
            resid,
            dash(ex.map(|e| format!("{e:.1e}"))),
            dash(ea.map(|e| format!("{e:.1e}"))),
        );
    }
}

/// The state of a demo session: the factorisation and the data it represents.
struct Session<T: GpuScalar> {
    backend: Backend,
    qr: Box<dyn QrUpdate<T>>,
    a: Mat<T>,
    y: Mat<T>,
}

impl<T: GpuScalar> Session<T> {
    /// Applies `update` to the factorisation (timed), to the data, refactorises
    /// the new data from scratch (timed) and prints the table row.
    fn step(&mut self, label: &str, update: Update<T>) -> CliResult<()> {
        update.check(self.a.nrows(), self.a.ncols(), 1)?;
        let t = Instant::now();
        update.apply(self.qr.as_mut())?;
        let t_upd = t.elapsed().as_secs_f64() * 1e3;
        let (a, y) = update.apply_dense(&self.a, &self.y);
        self.a = a;
        self.y = y;

        let t = Instant::now();
        let fresh = backend::factorize(
            &self.backend,
            self.a.as_ref(),
            self.y.as_ref(),
            QPolicy::Thin,
        )?;
        let t_fresh = t.elapsed().as_secs_f64() * 1e3;

        let sol = self.qr.solve()?;
        let sol_fresh = fresh.solve()?;
        Table::row(
            label,
            self.a.nrows(),
            self.a.ncols(),
            Some(t_upd),
            t_fresh,
            sol.residual_norms[0],
            Some(rel_diff(&sol.x, &sol_fresh.x)),
            e_a(self.qr.as_ref(), &self.a)?,
        );
        Ok(())
    }
}

fn session<T: GpuScalar>(backend: Backend, seed: u64, s: Sizes) -> CliResult<()> {
    let mut rng = Rng::new(seed);
    let mut vars: Vec<Variable> = (0..s.n)
        .map(|_| Variable {
            scale: 0.5 + 1.5 * rng.uniform(),
            beta: 2.0 * rng.normal(),
        })
        .collect();
    // The variable the analyst will find irrelevant and drop.
    let drop_col = s.n / 3 + rng.below(s.n / 3);
    vars[drop_col].beta = 0.0;
    let (a, y) = observations::<T>(&mut rng, &vars, s.m);

    println!(
        "precision: {}   seed: {seed}   data: {} observations x {} variables, y = X*beta + {SIGMA}*noise",
        T::NAME,
        s.m,
        s.n
    );
    println!();
    Table::header();

    let t = Instant::now();
    let qr = backend::factorize(&backend, a.as_ref(), y.as_ref(), QPolicy::Thin)?;
    let t_fact = t.elapsed().as_secs_f64() * 1e3;
    let sol = qr.solve()?;
    let ea = e_a(qr.as_ref(), &a)?;
    Table::row(
        "factorize",
        s.m,
        s.n,
        None,
        t_fact,
        sol.residual_norms[0],
        None,
        ea,
    );
    let mut st = Session { backend, qr, a, y };

    // 1. A batch of new observations arrives (appended).
    let (u, e) = observations::<T>(&mut rng, &vars, s.add_rows);
    let k0 = st.a.nrows();
    st.step(
        &format!("+{} observations", s.add_rows),
        Update::InsertRows { k0, u, e },
    )?;

    // 2. Drop the irrelevant variable.
    vars.remove(drop_col);
    st.step(
        &format!("-1 variable (#{drop_col})"),
        Update::DeleteCols { k0: drop_col, p: 1 },
    )?;

    // 3. Candidate variables (true coefficient 0) inserted in the middle.
    let pos = st.a.ncols() / 2;
    let new_vars: Vec<Variable> = (0..s.add_cols)
        .map(|_| Variable {
            scale: 0.5 + 1.5 * rng.uniform(),
            beta: 0.0,
        })
        .collect();
    let u = Mat::from_fn(st.a.nrows(), s.add_cols, |_, j| {
        T::from_f64(new_vars[j].scale * rng.normal())
    });
    vars.splice(pos..pos, new_vars);
    st.step(
        &format!("+{} variables at {pos}", s.add_cols),
        Update::InsertCols { k0: pos, u },
    )?;

    // 4. Drop a run of observations (say, a faulty sensor period).
    let k0 = s.m / 4 + rng.below(s.m / 4);
    let label = format!("-{} observations at {k0}", s.del_rows);
    st.step(&label, Update::DeleteRows { k0, p: s.del_rows })?;

    // 5. Rank-one correction: variable j was recorded in the wrong unit;
    //    rescale it by 1.1 (column j += 0.1·column j, i.e. u = 0.1·a_j, v = e_j).
    let j = rng.below(s.n / 3);
    vars[j].scale *= 1.1;
    vars[j].beta /= 1.1;
    let u: Vec<T> = st.a.col(j).iter().map(|&x| x * T::from_f64(0.1)).collect();
    let mut v = vec![T::ZERO; st.a.ncols()];
    v[j] = T::ONE;
    st.step(&format!("rescale variable #{j}"), Update::RankOne { u, v })?;

    let sol = st.qr.solve()?;
    let worst = vars
        .iter()
        .enumerate()
        .map(|(j, v)| (sol.x[(j, 0)].to_f64() - v.beta).abs())
        .fold(0.0f64, f64::max);
    println!();
    println!(
        "coefficients: max |x_j - beta_j| = {worst:.2e} over {} variables (noise sigma = {SIGMA}; sigma/sqrt(m) = {:.1e})",
        vars.len(),
        SIGMA / (st.a.nrows() as f64).sqrt()
    );
    Ok(())
}
