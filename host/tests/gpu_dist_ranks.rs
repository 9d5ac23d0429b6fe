//! The distributed state in its one-process-per-GPU form, started the way a launcher starts
//! it: this test program runs itself once a rank (`RANK`, `WORLD_SIZE`, `LOCAL_RANK` and a
//! TCP rendezvous in the environment, as `torchrun` sets them), each rank joins with
//! `RankComm::from_env`, factorises its block of rows and runs the same updates; every rank's
//! solution must be the same to the last bit and agree with the single-GPU state on the whole
//! problem (R-only with the all-gather and with the tree combine, thin, and R-only over a
//! communicator that the test makes with NCCL itself and hands over with
//! `RankComm::from_nccl`), each state over a new rendezvous on the same address, and a block
//! that one rank refuses must stop every rank with an error (none may hang). Needs two GPUs
//! or more (NCCL takes one rank a device); without them it prints "skipped";
//! `CUQR_REQUIRE_GPU=1` makes a missing GPU a failure.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{random_mat, rng};
use std::sync::Arc;

use cuqr::distributed::{Combine, DistQr, ForeignNccl, Launch, RankComm, Rendezvous};
use cuqr::{FactorParams, Gpu, GpuQr, Mat, QPolicy, QrUpdate};

const SEED: u64 = 4242;
const M: usize = 1111;
const N: usize = 37;
const Q: usize = 2;

/// The states every rank makes in turn: R-only (all-gather), thin, R-only with the tree.
const KINDS: [(QPolicy, Combine); 3] = [
    (QPolicy::None, Combine::AllGather),
    (QPolicy::Thin, Combine::Auto),
    (QPolicy::None, Combine::Tree),
];

/// The state made last, over a communicator made outside cuqr.
const FOREIGN: (QPolicy, Combine) = (QPolicy::None, Combine::Tree);

/// One update of the sequence every rank and the single-GPU state run.
enum Step {
    Slide(Mat<f64>, Mat<f64>, usize),
    InsertRows(usize, Mat<f64>, Mat<f64>),
    DeleteRows(usize, usize),
    InsertCols(usize, Mat<f64>),
    RankOne(Vec<f64>, Vec<f64>),
}

/// The problem and its updates, made alike in every process from the seed.
fn problem() -> (Mat<f64>, Mat<f64>, Vec<Step>) {
    let mut r = rng(SEED);
    let a = random_mat::<f64>(&mut r, M, N);
    let b = random_mat::<f64>(&mut r, M, Q);
    let mut steps = Vec::new();
    for s in 0..8 {
        let p = 29 + s % 3 * 20;
        steps.push(Step::Slide(
            random_mat(&mut r, p, N),
            random_mat(&mut r, p, Q),
            p,
        ));
    }
    steps.push(Step::InsertRows(
        400,
        random_mat(&mut r, 13, N),
        random_mat(&mut r, 13, Q),
    ));
    steps.push(Step::DeleteRows(500, 61));
    steps.push(Step::InsertCols(5, random_mat(&mut r, M + 13 - 61, 3)));
    let u: Vec<f64> = (0..M + 13 - 61)
        .map(|i| ((i * 7) % 13) as f64 / 13.0 - 0.4)
        .collect();
    let v: Vec<f64> = (0..N + 3)
        .map(|j| ((j * 5) % 11) as f64 / 11.0 - 0.5)
        .collect();
    steps.push(Step::RankOne(u, v));
    (a, b, steps)
}

fn apply_dist(d: &mut DistQr<f64>, s: &Step) -> cuqr::Result<()> {
    match s {
        Step::Slide(r, e, p) => d.slide(r.as_ref(), e.as_ref(), *p),
        Step::InsertRows(k, u, e) => d.insert_rows(*k, u.as_ref(), e.as_ref()),
        Step::DeleteRows(k, p) => d.delete_rows(*k, *p),
        Step::InsertCols(k, u) => d.insert_cols(*k, u.as_ref()),
        Step::RankOne(u, v) => d.rank_one(u, v),
    }
}

fn apply_one(g: &mut GpuQr<f64>, s: &Step) -> cuqr::Result<()> {
    match s {
        Step::Slide(r, e, p) => g.slide(r.as_ref(), e.as_ref(), *p),
        Step::InsertRows(k, u, e) => g.insert_rows(*k, u.as_ref(), e.as_ref()),
        Step::DeleteRows(k, p) => g.delete_rows(*k, *p),
        Step::InsertCols(k, u) => g.insert_cols(*k, u.as_ref()),
        Step::RankOne(u, v) => g.rank_one(u, v),
    }
}

/// Rank `rank`'s block of `world` nearly equal consecutive blocks.
fn block(a: &Mat<f64>, rank: usize, world: usize) -> Mat<f64> {
    let (q, extra) = (a.nrows() / world, a.nrows() % world);
    let r0 = rank * q + rank.min(extra);
    let len = q + usize::from(rank < extra);
    Mat::from_fn(len, a.ncols(), |i, j| a[(r0 + i, j)])
}

/// A solution as one line: x (column-major) and the residual norms, as the bits of each.
fn line(what: &str, sol: &cuqr::Solution<f64>) -> String {
    let bits: Vec<String> = sol
        .x
        .as_slice()
        .iter()
        .chain(&sol.residual_norms)
        .map(|v| format!("{:016x}", v.to_bits()))
        .collect();
    format!("{what} {}", bits.join(" "))
}

/// The rank's part, run only when the test below starts this program as a rank.
#[test]
#[ignore = "one rank of ranks_started_as_processes_agree_with_one_gpu, which starts it"]
fn rank_process() {
    let out = PathBuf::from(std::env::var("CUQR_TEST_RANK_OUT").expect("started as a rank"));
    let (a, b, steps) = problem();
    let keep = FactorParams {
        keep_data: true,
        ..FactorParams::default()
    };
    let mut lines = Vec::new();
    for (policy, combine) in KINDS {
        let comm = RankComm::from_env().unwrap().with_combine(combine);
        let (rank, world) = (comm.rank(), comm.world());
        let (ab, bb) = (block(&a, rank, world), block(&b, rank, world));
        let mut d = DistQr::factorize_rank(comm, ab.as_ref(), bb.as_ref(), policy, keep).unwrap();
        let tag = format!("{policy:?}-{combine:?}");
        lines.push(line(&format!("{tag} factorize"), &d.solve().unwrap()));
        for (i, s) in steps.iter().enumerate() {
            apply_dist(&mut d, s).unwrap();
            lines.push(line(&format!("{tag} step{i}"), &d.solve().unwrap()));
        }
    }
    lines.extend(foreign_comm_steps(&a, &b, &steps, keep));
    // rank 1 hands over a block with a NaN: every rank must return an error
    let comm = RankComm::from_env().unwrap();
    let (rank, world) = (comm.rank(), comm.world());
    let mut ab = block(&a, rank, world);
    if rank == 1 {
        ab[(3, 4)] = f64::NAN;
    }
    let bb = block(&b, rank, world);
    match DistQr::factorize_rank(comm, ab.as_ref(), bb.as_ref(), QPolicy::None, keep) {
        Ok(_) => lines.push("refusal accepted".into()),
        Err(e) => lines.push(format!("refusal {e}")),
    }
    std::fs::write(out, lines.join("\n") + "\n").unwrap();
}

/// The R-only tree state over a communicator made outside cuqr (as PyTorch makes one) and
/// joined with `RankComm::from_nccl`; the communicator is destroyed by its maker after the
/// state is gone.
fn foreign_comm_steps(
    a: &Mat<f64>,
    b: &Mat<f64>,
    steps: &[Step],
    keep: FactorParams,
) -> Vec<String> {
    let me = Launch::from_env().unwrap().expect("started as a rank");
    let id = Rendezvous::from_env()
        .unwrap()
        .share_id(me.rank, me.world)
        .unwrap();
    let hex = id.to_hex();
    let mut internal = [0 as core::ffi::c_char; 128];
    for (k, x) in internal.iter_mut().enumerate() {
        *x = u8::from_str_radix(&hex[2 * k..2 * k + 2], 16).unwrap() as core::ffi::c_char;
    }
    let gpu = Arc::new(Gpu::new(me.local_rank).unwrap());
    let mut raw = core::mem::MaybeUninit::uninit();
    // SAFETY: NCCL writes a new communicator into `raw` (the current device is the rank's,
    // bound by Gpu::new); every rank passes the same id and its own rank.
    let raw = unsafe {
        cudarc::nccl::result::comm_init_rank(
            raw.as_mut_ptr(),
            me.world as i32,
            cudarc::nccl::sys::ncclUniqueId { internal },
            me.rank as i32,
        )
        .unwrap();
        raw.assume_init()
    };
    let mut lines = Vec::new();
    {
        // SAFETY: `raw` is live until comm_destroy below, after every cuqr object using it
        // has dropped; nothing else issues on it.
        let comm = RankComm::from_nccl(&gpu, unsafe { ForeignNccl::new(raw.cast()) })
            .unwrap()
            .with_combine(FOREIGN.1);
        assert_eq!((comm.rank(), comm.world()), (me.rank, me.world));
        let (ab, bb) = (block(a, me.rank, me.world), block(b, me.rank, me.world));
        let mut d =
            DistQr::factorize_rank(comm, ab.as_ref(), bb.as_ref(), FOREIGN.0, keep).unwrap();
        lines.push(line("foreign factorize", &d.solve().unwrap()));
        for (i, s) in steps.iter().enumerate() {
            apply_dist(&mut d, s).unwrap();
            lines.push(line(&format!("foreign step{i}"), &d.solve().unwrap()));
        }
    }
    gpu.synchronize().unwrap();
    // SAFETY: no cuqr object refers to `raw` any more; it is destroyed once, by its maker.
    unsafe { cudarc::nccl::result::comm_destroy(raw) }.unwrap();
    lines
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Where a rank's output goes.
fn log(out: &Path) -> PathBuf {
    out.with_extension("log")
}

fn spawn_rank(rank: usize, world: usize, port: u16, out: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "rank_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("CUQR_RENDEZVOUS", format!("127.0.0.1:{port}"))
        .env("CUQR_RENDEZVOUS_TIMEOUT", "60")
        .env("NCCL_NVLS_ENABLE", "0")
        .env("CUQR_TEST_RANK_OUT", out)
        .stdout(Stdio::from(std::fs::File::create(log(out)).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(log(out)).unwrap()))
        .spawn()
        .unwrap()
}

/// Waits for every rank, failing (after killing the others) on one that hangs or fails.
fn wait_all(mut kids: Vec<(Child, PathBuf)>, limit: Duration) {
    let start = Instant::now();
    let mut done = vec![false; kids.len()];
    while done.iter().any(|d| !d) {
        for (r, (k, out)) in kids.iter_mut().enumerate() {
            if !done[r] {
                if let Some(st) = k.try_wait().unwrap() {
                    done[r] = true;
                    if !st.success() {
                        let o = std::fs::read_to_string(log(out)).unwrap_or_default();
                        for (k, _) in kids.iter_mut() {
                            let _ = k.kill();
                        }
                        panic!("a rank failed ({st}):\n{o}");
                    }
                }
            }
        }
        if start.elapsed() > limit {
            for (k, _) in kids.iter_mut() {
                let _ = k.kill();
            }
            panic!("ranks still running after {limit:?}: done {done:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn parse_line(l: &str) -> (String, Vec<f64>) {
    let mut it = l.split(' ');
    let what = format!("{} {}", it.next().unwrap(), it.next().unwrap());
    let vals = it
        .map(|h| f64::from_bits(u64::from_str_radix(h, 16).unwrap()))
        .collect();
    (what, vals)
}

#[test]
fn ranks_started_as_processes_agree_with_one_gpu() {
    let Some(g0) = common::shared_gpu() else {
        return;
    };
    let world = (0..4).take_while(|&i| Gpu::new(i).is_ok()).count();
    if world < 2 {
        eprintln!("skipped: fewer than two GPUs (NCCL takes one rank a device)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("cuqr-ranks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let outs: Vec<PathBuf> = (0..world).map(|r| dir.join(format!("rank{r}"))).collect();
    let port = free_port();
    // the last rank first: the others wait for rank 0 to listen
    let kids: Vec<(Child, PathBuf)> = (0..world)
        .rev()
        .map(|r| (spawn_rank(r, world, port, &outs[r]), outs[r].clone()))
        .collect();
    wait_all(kids, Duration::from_secs(300));
    let texts: Vec<String> = outs
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    for (r, t) in texts.iter().enumerate().skip(1) {
        let (l0, lr): (Vec<&str>, Vec<&str>) = (texts[0].lines().collect(), t.lines().collect());
        assert_eq!(l0.len(), lr.len());
        for (x, y) in l0.iter().zip(&lr) {
            if !x.starts_with("refusal") {
                assert_eq!(x, y, "rank {r} differs from rank 0");
            }
        }
    }
    // every rank refused the block with a NaN on rank 1
    for (r, t) in texts.iter().enumerate() {
        let last = t.lines().last().unwrap();
        assert!(last.starts_with("refusal "), "rank {r}: {last}");
        assert!(!last.contains("accepted"), "rank {r}: {last}");
    }
    let (a, b, steps) = problem();
    let keep = FactorParams {
        keep_data: true,
        ..FactorParams::default()
    };
    let mut lines = texts[0].lines();
    for (policy, _) in KINDS.into_iter().chain([FOREIGN]) {
        let mut s = GpuQr::factorize(&g0, a.as_ref(), b.as_ref(), policy, keep).unwrap();
        for i in 0..=steps.len() {
            if i > 0 {
                apply_one(&mut s, &steps[i - 1]).unwrap();
            }
            let sol = s.solve().unwrap();
            let (what, vals) = parse_line(lines.next().unwrap());
            let want: Vec<f64> = sol
                .x
                .as_slice()
                .iter()
                .chain(&sol.residual_norms)
                .copied()
                .collect();
            assert_eq!(vals.len(), want.len(), "{what}");
            let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            let err = vals
                .iter()
                .zip(&want)
                .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
            assert!(err <= 1e-8 * scale, "{what}: differs by {err:e}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
