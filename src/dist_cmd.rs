//! `cuqr dist`: the row-distributed state on a user's `.npy` data or random data, from one
//! process driving `--gpus N` devices or as one rank of a process group (started by
//! `torchrun`, `mpirun` or `srun` with `--launcher env`, or by hand with `--rank R --world W
//! --id-file F`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuqr::distributed::{DistQr, Launch, NcclId, RankComm};
use cuqr::{FactorParams, Gpu, Mat, QPolicy};

use cuqr_cli::cli::{parse_or_help, CliResult, Opts};
use cuqr_cli::npy;
use cuqr_cli::rng::random_signed_matrix;
use cuqr_cli::stats::upper_median;

/// `cuqr dist --help`.
pub const HELP: &str = "\
cuqr dist: least squares with the rows of A spread over several GPUs (NCCL)

Usage: cuqr dist factorize|window --gpus N [data] [options]
       cuqr dist factorize|window --launcher env [data] [options]
       cuqr dist factorize|window --rank R --world W --id-file FILE [data] [options]

  factorize   TSQR factorisation; prints the time split and the residual norm
  window      factorises the first --window rows, then slides the window --steps
              steps of --step rows (P rows in on one GPU, the oldest P out),
              printing the median step time

Data: --a A.npy --b B.npy (float64 or float32, 1-D or 2-D, C or Fortran order).
  One file: every rank reads only its share of the rows (and, for a window
  step, the step's rows). A name with {rank} in it: each rank reads its own
  file, whose rows are that rank's block (factorize only).
  Without --a: random data of --rows M x --cols N, each rank its own rows.

How the ranks start:
  --gpus N         one process for devices 0..N-1 (--gpus 1 --parts G: G logical
                   partitions of device 0)
  --launcher env   one process per GPU, started by torchrun, mpirun or srun: the
                   rank, world size and GPU (local rank) come from the launcher's
                   environment; rank 0 hands NCCL's id to the others over TCP at
                   CUQR_RENDEZVOUS=host:port (default MASTER_ADDR with the port
                   after MASTER_PORT)
  --rank R --world W --id-file FILE
                   one process per GPU started by hand: rank 0 writes NCCL's id
                   to FILE (a file system all ranks see), the others wait for it;
                   --device D picks the GPU (default: R)

Options:
  --out DIR    write x.npy (N x Q) and residual_norms.npy (Q) there (rank 0)
  --window W   rows of the first window (default: all rows but --step x --steps)
  --rows M     random data: rows in all (default 200000)
  --cols N     random data: columns (default 64)
  --step P     rows a window step (default 100)
  --steps S    window steps (default 10; with one file, as many as its rows give)

Keep NCCL_NVLS_ENABLE=0 (NVLink multicast off) on shared machines.
";

const OPTS: &[&str] = &[
    "gpus", "parts", "rows", "cols", "step", "steps", "rank", "world", "id-file", "device",
    "launcher", "a", "b", "out", "window",
];

fn num(o: &Opts, name: &str, default: usize) -> CliResult<usize> {
    Ok(o.usize(name)?.unwrap_or(default))
}

/// Where the rows come from.
enum Data {
    /// Random rows of `m`×`n` (one right-hand side), each rank its own seed.
    Random { m: usize, n: usize },
    /// One `.npy` pair: a rank reads its share of the rows.
    Shared { a: PathBuf, b: PathBuf, m: usize },
    /// One `.npy` pair a rank (`{rank}` in the names).
    PerRank { a: String, b: String },
}

impl Data {
    fn from_opts(o: &Opts) -> CliResult<Self> {
        let (a, b) = match (o.get("a"), o.get("b")) {
            (None, None) => {
                return Ok(Data::Random {
                    m: num(o, "rows", 200_000)?,
                    n: num(o, "cols", 64)?,
                })
            }
            (Some(a), Some(b)) => (a, b),
            _ => return Err("dist: --a and --b come together".into()),
        };
        if a.contains("{rank}") != b.contains("{rank}") {
            return Err("dist: --a and --b both name one file or both have {rank}".into());
        }
        if a.contains("{rank}") {
            return Ok(Data::PerRank {
                a: a.into(),
                b: b.into(),
            });
        }
        let (m, _) = npy::shape_of(Path::new(a))?;
        let (mb, _) = npy::shape_of(Path::new(b))?;
        if mb != m {
            return Err(format!("dist: {a} has {m} rows, {b} {mb}").into());
        }
        Ok(Data::Shared {
            a: a.into(),
            b: b.into(),
            m,
        })
    }

    /// Rows in all (`None` for per-rank files, known only after the factorisation).
    fn rows(&self) -> Option<usize> {
        match self {
            Data::Random { m, .. } | Data::Shared { m, .. } => Some(*m),
            Data::PerRank { .. } => None,
        }
    }

    /// Rows `r0..r0 + len` of A and b (`seed` tells ranks apart for random data).
    fn rows_of(&self, r0: usize, len: usize, seed: u64) -> CliResult<(Mat<f64>, Mat<f64>)> {
        match self {
            Data::Random { n, .. } => Ok((
                random_signed_matrix::<f64>(len, *n, 1 + seed),
                random_signed_matrix::<f64>(len, 1, 101 + seed),
            )),
            Data::Shared { a, b, .. } => Ok((
                npy::read_rows(a, r0, len)?.to_mat(),
                npy::read_rows(b, r0, len)?.to_mat(),
            )),
            Data::PerRank { .. } => Err("dist: per-rank files have no shared rows".into()),
        }
    }
}

/// The run's shape: rows of the first factorisation, then the window steps.
struct Plan {
    window: bool,
    first: usize,
    step: usize,
    steps: usize,
}

impl Plan {
    fn from_opts(o: &Opts, what: &str, data: &Data) -> CliResult<Self> {
        let window = what == "window";
        let step = num(o, "step", 100)?;
        let (first, steps) = match (data, window) {
            (_, false) => (data.rows().unwrap_or(0), 0),
            (Data::PerRank { .. }, true) => {
                return Err(
                    "dist window: give one --a file (every rank reads the step's rows)".into(),
                )
            }
            (Data::Random { m, .. }, true) => (*m, num(o, "steps", 10)?),
            (Data::Shared { m, .. }, true) => {
                let steps = o.usize("steps")?;
                let first = match o.usize("window")? {
                    Some(w) => w,
                    None => m.saturating_sub(step * steps.unwrap_or(10)),
                };
                if first == 0 || first > *m {
                    return Err(format!("dist window: --window {first} of {m} rows").into());
                }
                let fit = (m - first) / step.max(1);
                (first, steps.unwrap_or(fit).min(fit))
            }
        };
        if window && step == 0 {
            return Err("dist window: --step must be at least 1".into());
        }
        Ok(Plan {
            window,
            first,
            step,
            steps,
        })
    }
}

/// This process's rank, world and GPU where it is one rank of a process group.
fn rank_comm(o: &Opts) -> CliResult<Option<RankComm>> {
    if let Some(l) = o.get("launcher") {
        if l != "env" {
            return Err(format!("dist: --launcher env is the one launcher form, not '{l}'").into());
        }
        let me = Launch::from_env()?.ok_or(
            "dist --launcher env: no RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_* (mpirun), PMI_* or SLURM_* in the environment",
        )?;
        return Ok(Some(RankComm::from_launch(
            me,
            num(o, "device", me.local_rank)?,
        )?));
    }
    let Some(rank) = o.get("rank") else {
        return Ok(None);
    };
    let rank: usize = rank.parse().map_err(|_| "dist: --rank must be a number")?;
    let world = num(o, "world", 0)?;
    let file = o.get("id-file").ok_or("dist: --rank needs --id-file")?;
    if world == 0 || rank >= world {
        return Err("dist: --world W must exceed --rank".into());
    }
    let id = if rank == 0 {
        let id = NcclId::new()?;
        std::fs::write(file, id.to_hex()).map_err(|e| format!("dist: writing {file}: {e}"))?;
        id
    } else {
        let start = Instant::now();
        loop {
            if let Ok(t) = std::fs::read_to_string(file) {
                if t.trim().len() == 256 {
                    break NcclId::from_hex(&t)?;
                }
            }
            if start.elapsed() > Duration::from_secs(120) {
                return Err(format!("dist: no id in {file} after 120 s").into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let gpu = Arc::new(Gpu::new(num(o, "device", rank)?)?);
    Ok(Some(RankComm::new(&gpu, rank, world, id)?))
}

/// Nearly equal consecutive blocks of `m` rows for `world` ranks: rank `r`'s first row and
/// count (the split `DistQr::factorize` makes).
fn share(m: usize, world: usize, r: usize) -> (usize, usize) {
    let (q, extra) = (m / world, m % world);
    (r * q + r.min(extra), q + usize::from(r < extra))
}

/// Factorises the first window: as rank `comm` of a process group, or over `--gpus`.
fn factorize(o: &Opts, data: &Data, plan: &Plan) -> CliResult<(DistQr<f64>, usize)> {
    let keep = FactorParams {
        keep_data: plan.window,
        ..FactorParams::default()
    };
    if let Some(comm) = rank_comm(o)? {
        let (rank, world) = (comm.rank(), comm.world());
        let (a, b) = match data {
            Data::PerRank { a, b } => {
                let name = |f: &str| f.replace("{rank}", &rank.to_string());
                let (fa, fb) = (name(a), name(b));
                let (a, b) = (
                    npy::read_file(Path::new(&fa))?,
                    npy::read_file(Path::new(&fb))?,
                );
                (a.to_mat(), b.to_mat())
            }
            _ => {
                let (r0, len) = share(plan.first, world, rank);
                data.rows_of(r0, len, rank as u64)?
            }
        };
        let st = DistQr::factorize_rank(comm, a.as_ref(), b.as_ref(), QPolicy::None, keep)?;
        return Ok((st, rank));
    }
    let g = num(o, "gpus", 1)?;
    let parts = num(o, "parts", g)?;
    let gpus: Vec<Arc<Gpu>> = if g == 1 {
        let d = Arc::new(Gpu::new(0)?);
        vec![d; parts.max(1)]
    } else {
        (0..g)
            .map(|i| Gpu::new(i).map(Arc::new))
            .collect::<cuqr::Result<_>>()?
    };
    let (a, b) = match data {
        Data::PerRank { .. } => return Err("dist: {rank} files need one process a rank".into()),
        _ => data.rows_of(0, plan.first, 0)?,
    };
    let st = DistQr::factorize(&gpus, a.as_ref(), b.as_ref(), QPolicy::None, keep)?;
    Ok((st, 0))
}

/// Runs `cuqr dist ...`.
pub fn run(args: &[String]) -> CliResult<()> {
    let Some(what) = args.first().cloned() else {
        print!("{HELP}");
        return Err("dist: factorize or window?".into());
    };
    if cuqr_cli::cli::is_help(&what) {
        print!("{HELP}");
        return Ok(());
    }
    if what != "factorize" && what != "window" {
        return Err(format!("dist: unknown action '{what}' (factorize or window)").into());
    }
    let Some(o) = parse_or_help("dist", &args[1..], OPTS, HELP)? else {
        return Ok(());
    };
    let data = Data::from_opts(&o)?;
    let plan = Plan::from_opts(&o, &what, &data)?;
    let t0 = Instant::now();
    let (mut st, rank) = factorize(&o, &data, &plan)?;
    st.synchronize()?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let sol = st.solve()?;
    if rank == 0 {
        println!(
            "factorize: {} x {} over {} ranks (rows {:?}) in {ms:.1} ms (with reading and upload); residual norm {:.6e}",
            st.nrows(),
            st.ncols(),
            st.world(),
            st.rows_per_rank(),
            sol.residual_norms[0]
        );
    }
    if plan.window {
        slide_steps(&mut st, &data, &plan, rank)?;
    }
    if let (Some(dir), 0) = (o.get("out"), rank) {
        write_solution(Path::new(dir), &st)?;
    }
    Ok(())
}

/// The window steps: rows `first + s·P ..` in, the P oldest out, every rank alike.
fn slide_steps(st: &mut DistQr<f64>, data: &Data, plan: &Plan, rank: usize) -> CliResult<()> {
    let mut times = Vec::new();
    for s in 0..plan.steps {
        let (rows, rhs) = data.rows_of(plan.first + s * plan.step, plan.step, 1000 + s as u64)?;
        let t = Instant::now();
        st.slide(rows.as_ref(), rhs.as_ref(), plan.step)?;
        st.synchronize()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let median_ms = if times.is_empty() {
        0.0
    } else {
        upper_median(times)
    };
    let sol = st.solve()?;
    if rank == 0 {
        println!(
            "window: {} steps of {} rows, median {:.3} ms a step; rows a rank {:?}; residual norm {:.6e}",
            plan.steps,
            plan.step,
            median_ms,
            st.rows_per_rank(),
            sol.residual_norms[0]
        );
    }
    Ok(())
}

/// `x.npy` and `residual_norms.npy` in `dir`.
fn write_solution(dir: &Path, st: &DistQr<f64>) -> CliResult<()> {
    std::fs::create_dir_all(dir).map_err(|e| format!("dist: creating {}: {e}", dir.display()))?;
    let sol = st.solve()?;
    npy::write_file(&dir.join("x.npy"), &sol.x, false)?;
    let norms = &sol.residual_norms;
    npy::write_file_c(&dir.join("residual_norms.npy"), norms, &[norms.len()])?;
    println!("wrote {}", dir.display());
    Ok(())
}
