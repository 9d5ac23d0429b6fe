//! `cuqr update` on complex data (an A file of complex128 or complex64): the explicit
//! factors of `cuqr::explicit` (docs/algorithms.md#explicit-factors), Q and R held whole,
//! on the CPU (`ExplicitQr`) or with Q in device memory (`GpuExplicitQr`). The operations
//! are those explicit factors take: insert-cols, delete-cols, insert-rows, delete-rows,
//! rank-one (A + u·vᴴ) and rank-k (A + U·Vᴴ); `--q-policy` thin (economic) or full.

use std::path::Path;
use std::time::Instant;

use cuqr::explicit::{c32, c64, ExplicitQr, Field, GpuExplicitQr, QrField};
use cuqr::{GpuField, QPolicy, Scalar};

use crate::backend::{self, Backend};
use crate::update_cmd::{ms, Job, Op, Summary};
use cuqr_cli::cli::{CliError, CliResult};
use cuqr_cli::npy::{self, Array, NpyValue};

/// The complex element types of the command: c64 (`--precision f64`) and c32 (`f32`).
pub trait CliComplex: QrField + GpuField + NpyValue {}
impl CliComplex for c64 {}
impl CliComplex for c32 {}

/// A column-major matrix of complex entries.
#[derive(Clone, Debug)]
struct Block<T> {
    rows: usize,
    cols: usize,
    data: Vec<T>,
}

impl<T: CliComplex> Block<T> {
    fn at(&self, i: usize, j: usize) -> T {
        self.data[i + j * self.rows]
    }
    fn from_fn(rows: usize, cols: usize, f: impl Fn(usize, usize) -> T) -> Self {
        let data = (0..cols)
            .flat_map(|j| (0..rows).map(move |i| (i, j)))
            .map(|(i, j)| f(i, j))
            .collect();
        Self { rows, cols, data }
    }
    fn transpose(&self) -> Self {
        Self::from_fn(self.cols, self.rows, |i, j| self.at(j, i))
    }
}

/// The explicit factors on the CPU or with Q on a GPU.
enum State<T: CliComplex> {
    Cpu(ExplicitQr<T>),
    Gpu(GpuExplicitQr<T>),
}

macro_rules! both {
    ($self:expr, $qr:ident => $e:expr) => {
        match $self {
            State::Cpu($qr) => $e,
            State::Gpu($qr) => $e,
        }
    };
}

/// Reads a `.npy` file of real or complex values as `T`s (real ones with zero imaginary
/// parts); a finite part that would round to ±∞ in `T` is an error naming the entry.
fn read<T: CliComplex>(path: &Path) -> CliResult<Block<T>> {
    Ok(read_1d(path)?.0)
}

/// [`read`], and whether the file held a 1-D array.
fn read_1d<T: CliComplex>(path: &Path) -> CliResult<(Block<T>, bool)> {
    let arr: Array = npy::read_file_complex(path)?;
    let zero = vec![0.0; arr.data.len()];
    let im = arr.imag.as_deref().unwrap_or(&zero);
    let rows = arr.nrows.max(1);
    let fits = |x: f64| !x.is_finite() || <T as Field>::Real::from_f64(x).is_finite();
    if let Some(k) = (0..arr.data.len()).find(|&k| !fits(arr.data[k]) || !fits(im[k])) {
        return Err(format!(
            "{}: entry ({}, {}) overflows {} (try --precision f64)",
            path.display(),
            k % rows,
            k / rows,
            T::NAME
        )
        .into());
    }
    let data = arr
        .data
        .iter()
        .zip(im)
        .map(|(&re, &im)| {
            T::from_parts(
                &[
                    <T as Field>::Real::from_f64(re),
                    <T as Field>::Real::from_f64(im),
                ][..T::PARTS],
            )
        })
        .collect();
    let block = Block {
        rows: arr.nrows,
        cols: arr.ncols,
        data,
    };
    Ok((block, arr.one_d))
}

/// A vector (1-D, or one row or column) of `T`s.
fn vector<T: CliComplex>(path: &Path, what: &str) -> CliResult<Vec<T>> {
    let b = read::<T>(path)?;
    if b.rows != 1 && b.cols != 1 {
        return Err(format!(
            "{what} must be a vector, got a {}x{} matrix",
            b.rows, b.cols
        )
        .into());
    }
    Ok(b.data)
}

/// The update with its operands, and what it does to the dense A and b.
enum Update<T> {
    InsertCols { k0: usize, u: Block<T> },
    DeleteCols { k0: usize, p: usize },
    InsertRows { k0: usize, u: Block<T>, e: Block<T> },
    DeleteRows { k0: usize, p: usize },
    RankK { u: Block<T>, v: Block<T> },
}

impl<T: CliComplex> Update<T> {
    fn apply(&self, st: &mut State<T>) -> cuqr::Result<()> {
        match self {
            Update::InsertCols { k0, u } => {
                both!(st, qr => qr.insert_cols(*k0, &u.data, u.cols, None))
            }
            Update::DeleteCols { k0, p } => both!(st, qr => qr.delete_cols(*k0, *p)),
            Update::InsertRows { k0, u, .. } => {
                both!(st, qr => qr.insert_rows(*k0, &u.data, u.rows))
            }
            Update::DeleteRows { k0, p } => both!(st, qr => qr.delete_rows(*k0, *p)),
            Update::RankK { u, v } => both!(st, qr => qr.rank_k(&u.data, &v.data, u.cols)),
        }
    }

    /// The block (first index, count) of a block update.
    fn block(&self) -> Option<(usize, usize)> {
        match self {
            Update::InsertCols { k0, u } => Some((*k0, u.cols)),
            Update::InsertRows { k0, u, .. } => Some((*k0, u.rows)),
            Update::DeleteCols { k0, p } | Update::DeleteRows { k0, p } => Some((*k0, *p)),
            Update::RankK { .. } => None,
        }
    }

    /// Ã and b̃: the update made to the dense A (m×n) and b (m×q).
    fn dense(&self, a: &Block<T>, b: &Block<T>) -> (Block<T>, Block<T>) {
        let (m, n) = (a.rows, a.cols);
        match self {
            Update::InsertCols { k0, u } => (
                Block::from_fn(m, n + u.cols, |i, j| match j {
                    j if j < *k0 => a.at(i, j),
                    j if j < k0 + u.cols => u.at(i, j - k0),
                    j => a.at(i, j - u.cols),
                }),
                b.clone(),
            ),
            Update::DeleteCols { k0, p } => (
                Block::from_fn(m, n - p, |i, j| a.at(i, if j < *k0 { j } else { j + p })),
                b.clone(),
            ),
            Update::InsertRows { k0, u, e } => {
                let rows = |x: &Block<T>, new: &Block<T>| {
                    Block::from_fn(m + u.rows, x.cols, |i, j| match i {
                        i if i < *k0 => x.at(i, j),
                        i if i < k0 + u.rows => new.at(i - k0, j),
                        i => x.at(i - u.rows, j),
                    })
                };
                (rows(a, u), rows(b, e))
            }
            Update::DeleteRows { k0, p } => {
                let rows = |x: &Block<T>| {
                    Block::from_fn(m - p, x.cols, |i, j| {
                        x.at(if i < *k0 { i } else { i + p }, j)
                    })
                };
                (rows(a), rows(b))
            }
            Update::RankK { u, v } => (
                Block::from_fn(m, n, |i, j| {
                    (0..u.cols).fold(a.at(i, j), |s, l| s + u.at(i, l) * v.at(j, l).conj())
                }),
                b.clone(),
            ),
        }
    }
}

/// Runs `cuqr update` on the complex A of `job`.
pub fn run<T: CliComplex>(job: &Job) -> CliResult<()> {
    let economic = match job.policy {
        QPolicy::Thin => true,
        QPolicy::Full => false,
        _ => {
            return Err("update: complex A is held with Q: use --q-policy thin or full".into());
        }
    };
    let (backend, note) = backend::resolve(job.choice)?;
    let a = read::<T>(&job.a)?;
    let (m, n) = (a.rows, a.cols);
    let (b, b_one_d) = match &job.b {
        None => (Block::from_fn(m, 1, |_, _| <T as Field>::one()), true),
        Some(p) => {
            let (b, one_d) = read_1d::<T>(p)?;
            if b.rows != m {
                return Err(format!(
                    "b has {} rows, A has {m} (b must be of length m or m x q)",
                    b.rows
                )
                .into());
            }
            (b, one_d)
        }
    };
    let update = build(job, m, n, b.cols)?;

    let t = Instant::now();
    let mut st = match &backend {
        Backend::Gpu(gpu) => State::Gpu(GpuExplicitQr::factorize(gpu, &a.data, (m, n), economic)?),
        Backend::Cpu { .. } => State::Cpu(ExplicitQr::factorize(&a.data, (m, n), economic)?),
    };
    let t_fact = ms(t);
    let t = Instant::now();
    update.apply(&mut st)?;
    let t_update = ms(t);
    let q = match &mut st {
        State::Cpu(qr) => qr.q().to_vec(),
        State::Gpu(qr) => qr.q()?,
    };
    let (r, (m2, t2), n2) = both!(&st, qr => (qr.r(), qr.q_shape(), qr.r_shape().1));
    let q = Block {
        rows: m2,
        cols: t2,
        data: q,
    };
    let r = Block {
        rows: t2,
        cols: n2,
        data: r,
    };

    let (at, bt) = update.dense(&a, &b);
    let t = Instant::now();
    let x = solve(&q, &r, &bt);
    let t_solve = ms(t);
    let e_q = unitarity(&q);
    let e_a = rel_residual(&q, &r, &at);

    std::fs::create_dir_all(&job.out).map_err(|e| {
        CliError(format!(
            "cannot create output folder {}: {e}",
            job.out.display()
        ))
    })?;
    npy::write_values(&job.out.join("R.npy"), &r.data, (r.rows, r.cols), false)?;
    npy::write_values(&job.out.join("Q.npy"), &q.data, (q.rows, q.cols), false)?;
    let residual_norms: Option<Vec<f64>> = x.as_ref().map(|x| {
        (0..bt.cols)
            .map(|c| {
                (0..m2)
                    .map(|i| {
                        let ax =
                            (0..n2).fold(<T as Field>::zero(), |s, j| s + at.at(i, j) * x.at(j, c));
                        abs2(bt.at(i, c) - ax)
                    })
                    .sum::<f64>()
                    .sqrt()
            })
            .collect()
    });
    if let Some(x) = &x {
        let one_d = b_one_d && x.cols == 1;
        npy::write_values(&job.out.join("x.npy"), &x.data, (x.rows, x.cols), one_d)?;
    }
    let summary = Summary {
        shape: (m2, n2, bt.cols),
        op: job.op.name(),
        block: match update.block() {
            Some((k0, p)) => (Some(k0), Some(p)),
            None => (None, None),
        },
        backend: &backend,
        note,
        precision: T::NAME,
        q_policy: if economic { "thin" } else { "full" },
        residual_norms: residual_norms.as_deref(),
        e_q: Some(e_q),
        e_a: Some(e_a),
        more: None,
        timings: (t_fact, t_update, t_solve),
    };
    summary.write(&job.out)?;
    summary.print_header((m, n));
    match residual_norms {
        Some(r) => println!(
            "residual norm {:.6e}, e_Q {e_q:.2e}, e_A {e_a:.2e}",
            r.iter().map(|v| v * v).sum::<f64>().sqrt()
        ),
        None => println!("e_Q {e_q:.2e}, e_A {e_a:.2e} (no x: A has fewer rows than columns)"),
    }
    println!("wrote {}", job.out.display());
    Ok(())
}

/// Reads the operation's operands.
fn build<T: CliComplex>(job: &Job, m: usize, n: usize, q: usize) -> CliResult<Update<T>> {
    let name = job.op.name();
    let k0 = job.k0.unwrap_or(0);
    let need = |p: &Option<std::path::PathBuf>, what: &str| -> CliResult<std::path::PathBuf> {
        p.clone()
            .ok_or_else(|| CliError(format!("update: --op {name} needs --{what}")))
    };
    let check_p = |got: usize, what: &str| -> CliResult<()> {
        match job.p {
            Some(p) if p != got => {
                Err(format!("update: --p {p} does not match the {got} {what} of U").into())
            }
            _ => Ok(()),
        }
    };
    Ok(match job.op {
        Op::InsertCols => {
            let u = read::<T>(&need(&job.u, "u")?)?;
            if u.rows != m {
                return Err(format!(
                    "insert-cols: U has {} rows, A has {m} (U must be m x p)",
                    u.rows
                )
                .into());
            }
            check_p(u.cols, "columns")?;
            Update::InsertCols { k0, u }
        }
        Op::DeleteCols => Update::DeleteCols {
            k0,
            p: job.p.unwrap_or(1),
        },
        Op::DeleteRows => Update::DeleteRows {
            k0,
            p: job.p.unwrap_or(1),
        },
        Op::InsertRows => {
            let (u, one_d) = read_1d::<T>(&need(&job.u, "u")?)?;
            // a 1-D U is one row
            let u = if one_d { u.transpose() } else { u };
            if u.cols != n {
                return Err(format!(
                    "insert-rows: U has {} columns, A has {n} (U must be p x n)",
                    u.cols
                )
                .into());
            }
            let p = u.rows;
            check_p(p, "rows")?;
            let e = match &job.e {
                None => Block::from_fn(p, q, |_, _| <T as Field>::one()),
                Some(path) => {
                    let e = read::<T>(path)?;
                    if e.cols == 1 && q != 1 && p == 1 {
                        e.transpose()
                    } else {
                        e
                    }
                }
            };
            if e.rows != p || e.cols != q {
                return Err(format!(
                    "insert-rows: e is {}x{}, expected {p}x{q} (rows of U x columns of b)",
                    e.rows, e.cols
                )
                .into());
            }
            Update::InsertRows { k0, u, e }
        }
        Op::RankOne => {
            let u = vector::<T>(&need(&job.u, "u")?, "u")?;
            let v = vector::<T>(&need(&job.v, "v")?, "v")?;
            Update::RankK {
                u: Block {
                    rows: u.len(),
                    cols: 1,
                    data: u,
                },
                v: Block {
                    rows: v.len(),
                    cols: 1,
                    data: v,
                },
            }
        }
        Op::RankK => {
            let u = read::<T>(&need(&job.u, "u")?)?;
            let v = read::<T>(&need(&job.v, "v")?)?;
            if u.rows != m || v.rows != n || u.cols != v.cols {
                return Err(format!(
                    "rank-k: U is {}x{} and V {}x{}, expected {m} x k and {n} x k",
                    u.rows, u.cols, v.rows, v.cols
                )
                .into());
            }
            Update::RankK { u, v }
        }
        Op::ReplaceCols | Op::ShiftCol => {
            return Err(format!(
                "update: --op {name} takes real data; complex A takes insert-cols, \
                 delete-cols, insert-rows, delete-rows, rank-one and rank-k"
            )
            .into())
        }
    })
}

/// The least-squares solution x = R₁⁻¹·(Qᴴb)₁ (m ≥ n, R₁ the leading n×n block), or
/// `None` for a wide A (fewer rows than columns) or a zero on R's diagonal.
fn solve<T: CliComplex>(q: &Block<T>, r: &Block<T>, b: &Block<T>) -> Option<Block<T>> {
    let (m, n) = (q.rows, r.cols);
    if m < n || (0..n).any(|j| r.at(j, j) == <T as Field>::zero()) {
        return None;
    }
    let mut x = Block::from_fn(n, b.cols, |_, _| <T as Field>::zero());
    for c in 0..b.cols {
        // c = (Qᴴ b)[..n], then back substitution
        let mut y: Vec<T> = (0..n)
            .map(|j| {
                (0..m).fold(<T as Field>::zero(), |s, i| {
                    s + q.at(i, j).conj() * b.at(i, c)
                })
            })
            .collect();
        for j in (0..n).rev() {
            let xj = y[j] / r.at(j, j);
            x.data[j + c * n] = xj;
            for (i, yi) in y.iter_mut().enumerate().take(j) {
                *yi -= r.at(i, j) * xj;
            }
        }
    }
    Some(x)
}

/// ‖QᴴQ − I‖_F.
fn unitarity<T: CliComplex>(q: &Block<T>) -> f64 {
    let mut s = 0.0;
    for j in 0..q.cols {
        for l in 0..q.cols {
            let g = (0..q.rows).fold(<T as Field>::zero(), |acc, i| {
                acc + q.at(i, l).conj() * q.at(i, j)
            });
            let g = if j == l { g - <T as Field>::one() } else { g };
            s += abs2(g);
        }
    }
    s.sqrt()
}

/// ‖QR − Ã‖_F / ‖Ã‖_F.
fn rel_residual<T: CliComplex>(q: &Block<T>, r: &Block<T>, a: &Block<T>) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for j in 0..a.cols {
        for i in 0..a.rows {
            let qr = (0..q.cols).fold(<T as Field>::zero(), |s, l| s + q.at(i, l) * r.at(l, j));
            num += abs2(qr - a.at(i, j));
            den += abs2(a.at(i, j));
        }
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

/// |x|² in f64.
fn abs2<T: Field>(x: T) -> f64 {
    let (re, im) = (x.re().to_f64(), x.im().to_f64());
    re * re + im * im
}
