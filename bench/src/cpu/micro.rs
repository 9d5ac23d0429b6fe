//! The cases of the criterion bench `benches/cpu.rs`: [`CpuQr::factorize`] under
//! [`FACTOR_POLICIES`], and each single-column / single-row update of [`UPDATES`]
//! applied to a factorised `QPolicy::Full` state, at the f64 sizes of [`SIZES`] (not
//! multiples of 32) with one right-hand side. Updates act in the middle of the matrix
//! (column ⌊n/2⌋, row ⌊m/2⌋). The data follows docs/performance.md ("Method"): seeded
//! random entries ±[0.1, 1), never zero, made once per size.

use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate};
use cuqr_cli::rng::Rng;

/// The m×n sizes benchmarked.
pub const SIZES: [(usize, usize); 2] = [(401, 41), (1001, 101)];

/// The factorisations timed: name and Q policy.
pub const FACTOR_POLICIES: [(&str, QPolicy); 2] =
    [("q_full", QPolicy::Full), ("q_none", QPolicy::None)];

/// The data of one size: A, b and the updates' vectors.
pub struct Data {
    pub m: usize,
    pub n: usize,
    pub a: Mat<f64>,
    pub b: Mat<f64>,
    /// The inserted column (length m).
    pub col: Vec<f64>,
    /// The inserted row (length n) and its right-hand side.
    pub row: Vec<f64>,
    pub rhs: Vec<f64>,
    /// The rank-one change u wᵀ.
    pub u: Vec<f64>,
    pub w: Vec<f64>,
}

impl Data {
    /// Random data of an m×n problem from `seed`.
    pub fn new(m: usize, n: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let a = Mat::from_fn(m, n, |_, _| rng.signed());
        let b = Mat::from_fn(m, 1, |_, _| rng.signed());
        let mut vec = |k: usize| -> Vec<f64> { (0..k).map(|_| rng.signed()).collect() };
        Data {
            m,
            n,
            a,
            b,
            col: vec(m),
            row: vec(n),
            rhs: vec(1),
            u: vec(m),
            w: vec(n),
        }
    }

    /// The `QPolicy::Full` state the updates start from.
    ///
    /// # Errors
    /// A factorisation error (random inputs have full rank).
    pub fn state(&self) -> cuqr::Result<CpuQr<f64>> {
        CpuQr::factorize(
            self.a.as_ref(),
            self.b.as_ref(),
            QPolicy::Full,
            FactorParams::default(),
        )
    }
}

/// An update applied to a state with the data of its size.
pub type Update = fn(&mut CpuQr<f64>, &Data) -> cuqr::Result<()>;

/// The updates timed: name and update.
pub const UPDATES: [(&str, Update); 5] = [
    ("insert_col", |s, d| s.insert_col(d.n / 2, &d.col)),
    ("delete_col", |s, d| s.delete_col(d.n / 2)),
    ("insert_row", |s, d| s.insert_row(d.m / 2, &d.row, &d.rhs)),
    ("delete_row", |s, d| s.delete_row(d.m / 2)),
    ("rank_one", |s, d| s.rank_one(&d.u, &d.w)),
];
