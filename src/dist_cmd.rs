//! `cuqr dist`: the row-distributed state on random data, from one process driving
//! `--gpus N` devices or as one rank of a process group (`--rank R --world W --id-file F`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use cuqr::distributed::{DistQr, NcclId, RankComm};
use cuqr::{FactorParams, Gpu, QPolicy};

use cuqr_cli::cli::{parse_or_help, CliResult};
use cuqr_cli::rng::random_signed_matrix;
use cuqr_cli::stats::upper_median;

/// `cuqr dist --help`.
pub const HELP: &str = "\
cuqr dist: least squares with the rows of A spread over several GPUs (NCCL)

Usage: cuqr dist factorize|window --gpus N [--rows M] [--cols N] [--step P] [--steps S]
       cuqr dist factorize|window --rank R --world W --id-file FILE [--device D] ...

  factorize   TSQR factorisation of a random M x N f64 problem; prints the time
              split (local QR, all-gather, combine) and the residual norm
  window      factorises, then slides the window S steps of P rows (P rows in
              on one GPU, the oldest P out), printing the median step time

One process for all GPUs of a host: --gpus N (devices 0..N; --gpus 1 --parts G
runs G logical partitions on device 0 instead).
One process per GPU (several hosts through a launcher): start W processes with
--rank 0..W-1 and the same --world W and --id-file FILE; rank 0 writes NCCL's
unique id to FILE (on a file system all ranks see), the others wait for it. Each
rank makes its own M/W rows. --device D picks the GPU (default: R).

Options:
  --rows M     rows in all (default 200000)
  --cols N     columns (default 64)
  --step P     rows a window step (default 100)
  --steps S    window steps (default 10)

Keep NCCL_NVLS_ENABLE=0 (NVLink multicast off) on shared machines.
";

const OPTS: &[&str] = &[
    "gpus", "parts", "rows", "cols", "step", "steps", "rank", "world", "id-file", "device",
];

fn num(o: &cuqr_cli::cli::Opts, name: &str, default: usize) -> CliResult<usize> {
    match o.get(name) {
        None => Ok(default),
        Some(v) => v
            .parse()
            .map_err(|_| format!("dist: --{name} must be a whole number, got '{v}'").into()),
    }
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
    let m = num(&o, "rows", 200_000)?;
    let n = num(&o, "cols", 64)?;
    let p = num(&o, "step", 100)?;
    let steps = num(&o, "steps", 10)?;
    let keep = FactorParams {
        keep_data: what == "window",
        ..FactorParams::default()
    };
    let t0 = Instant::now();
    let mut st = if let Some(rank) = o.get("rank") {
        let rank: usize = rank.parse().map_err(|_| "dist: --rank must be a number")?;
        let world = num(&o, "world", 0)?;
        let file = o.get("id-file").ok_or("dist: --rank needs --id-file")?;
        let device = num(&o, "device", rank)?;
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
        let gpu = Arc::new(Gpu::new(device)?);
        let comm = RankComm::new(&gpu, rank, world, id)?;
        let rows = m / world + usize::from(rank < m % world);
        let a = random_signed_matrix::<f64>(rows, n, 1 + rank as u64);
        let b = random_signed_matrix::<f64>(rows, 1, 101 + rank as u64);
        DistQr::factorize_rank(comm, a.as_ref(), b.as_ref(), QPolicy::None, keep)?
    } else {
        let g = num(&o, "gpus", 1)?;
        let parts = num(&o, "parts", g)?;
        let gpus: Vec<Arc<Gpu>> = if g == 1 {
            let d = Arc::new(Gpu::new(0)?);
            vec![d; parts.max(1)]
        } else {
            (0..g)
                .map(|i| Gpu::new(i).map(Arc::new))
                .collect::<cuqr::Result<_>>()?
        };
        let a = random_signed_matrix::<f64>(m, n, 1);
        let b = random_signed_matrix::<f64>(m, 1, 101);
        DistQr::factorize(&gpus, a.as_ref(), b.as_ref(), QPolicy::None, keep)?
    };
    st.synchronize()?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let sol = st.solve()?;
    println!(
        "factorize: {} x {} over {} ranks (rows {:?}) in {ms:.1} ms (with upload); residual norm {:.6e}",
        st.nrows(),
        st.ncols(),
        st.world(),
        st.rows_per_rank(),
        sol.residual_norms[0]
    );
    if what == "window" {
        let mut times = Vec::new();
        for s in 0..steps {
            let rows = random_signed_matrix::<f64>(p, n, 1000 + s as u64);
            let rhs = random_signed_matrix::<f64>(p, 1, 2000 + s as u64);
            let t = Instant::now();
            st.slide(rows.as_ref(), rhs.as_ref(), p)?;
            st.synchronize()?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let median_ms = if times.is_empty() {
            0.0
        } else {
            upper_median(times)
        };
        let sol = st.solve()?;
        println!(
            "window: {steps} steps of {p} rows, median {:.3} ms a step; rows a rank {:?}; residual norm {:.6e}",
            median_ms,
            st.rows_per_rank(),
            sol.residual_norms[0]
        );
    }
    Ok(())
}
