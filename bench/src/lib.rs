//! `cuqr-bench <GROUP> [OPTIONS]` (also run as `cuqr bench ...`): benchmarks against
//! the in-process cuSOLVER baseline with CUDA events, warm-up and the median of ≥ 5
//! runs on random (never zero) device-resident data (the method: docs/performance.md).
//! Each group is a sibling file with `HELP` and `run(&[String])`; add a group by
//! adding a file and a line to `GROUPS`. The criterion benches (`benches/`) time the
//! case lists of [`kernels`] and [`cpu`].

mod batch;
mod chains;
mod common;
mod complex;
pub mod cpu;
mod dense;
mod dist;
pub mod kernels;
mod lu;
mod mixed;
mod op;
mod opts;
mod python_overhead;
mod qbank;
mod qr;
mod rbank;
mod rolling;
mod small;
mod stats;
mod tall;
mod updates;
mod window;

use cuqr_cli::cli::{self, CliResult};
pub(crate) use opts::{
    check_csv_path, check_out_path, check_shape_fits, check_svg_dir, precision_list, BenchOpts,
};

/// A benchmark group: name, one-line summary, help text, entry point.
struct Group {
    name: &'static str,
    summary: &'static str,
    help: &'static str,
    run: fn(&[String]) -> CliResult<()>,
    /// Without a GPU its run fails (`cuqr bench --quick` skips it there); the others
    /// say what they cannot run, or run their CPU part.
    needs_gpu: bool,
    /// Whether `cuqr bench --quick` runs it (the tour's groups are fixed; `cpu` has
    /// its own `--quick`).
    in_quick_tour: bool,
}

/// Every benchmark group.
const GROUPS: &[Group] = &[
    Group {
        name: "lu",
        summary: "blocked LU with partial pivoting vs cuSOLVER getrf + getrs",
        help: lu::HELP,
        run: lu::run,
        needs_gpu: true,
        in_quick_tour: true,
    },
    Group {
        name: "qr",
        summary: "full QR factorisation vs cuSOLVER geqrf (+ orgqr), Kerr's accuracy criteria",
        help: qr::HELP,
        run: qr::run,
        needs_gpu: false,
        in_quick_tour: true,
    },
    Group {
        name: "updates",
        summary: "QR updates vs cuSOLVER refactorisation and the serial CPU update",
        help: updates::HELP,
        run: updates::run,
        needs_gpu: false,
        in_quick_tour: true,
    },
    Group {
        name: "tall",
        summary: "updates of tall thin-Q and R-only states vs cuSOLVER refactorisation",
        help: tall::HELP,
        run: tall::run,
        needs_gpu: true,
        in_quick_tour: true,
    },
    Group {
        name: "cpu",
        summary: "the CPU backend: factorisation and updates vs faer refactorisation and the serial reference",
        help: cpu::HELP,
        run: cpu::run,
        needs_gpu: false,
        in_quick_tour: false,
    },
    Group {
        name: "window",
        summary: "one sliding-window step of tall states vs cuSOLVER refactorisation",
        help: window::HELP,
        run: window::run,
        needs_gpu: true,
        in_quick_tour: true,
    },
    Group {
        name: "dist",
        summary: "the row-distributed state over this host's GPUs: strong and weak scaling",
        help: dist::HELP,
        run: dist::run,
        needs_gpu: true,
        in_quick_tour: false,
    },
    Group {
        name: "mixed",
        summary: "mixed-precision least squares vs cuSOLVER f64 LS and IRS gels",
        help: mixed::HELP,
        run: mixed::run,
        needs_gpu: true,
        in_quick_tour: true,
    },
    Group {
        name: "chains",
        summary: "time per dependent step of each chain in the updates",
        help: chains::HELP,
        run: chains::run,
        needs_gpu: true,
        in_quick_tour: true,
    },
    Group {
        name: "kernels",
        summary: "kernel micro-benchmarks vs copy bandwidth and cuBLAS GEMM",
        help: kernels::HELP,
        run: kernels::run,
        needs_gpu: true,
        in_quick_tour: true,
    },
    Group {
        name: "qbank",
        summary: "batched thin-Q states on the GPU vs refactorising with cuBLAS geqrfBatched",
        help: qbank::HELP,
        run: qbank::run,
        needs_gpu: true,
        in_quick_tour: false,
    },
    Group {
        name: "rbank",
        summary: "batched R-only states on the GPU vs the CPU's batched state",
        help: rbank::HELP,
        run: rbank::run,
        needs_gpu: true,
        in_quick_tour: false,
    },
    Group {
        name: "complex",
        summary: "complex f64 explicit-factor updates on the GPU vs zgeqrf + zungqr, beside real f64",
        help: complex::HELP,
        run: complex::run,
        needs_gpu: true,
        in_quick_tour: false,
    },
    Group {
        name: "small",
        summary: "one small problem's window step on the GPU, one launch a step, vs the general states",
        help: small::HELP,
        run: small::run,
        needs_gpu: true,
        in_quick_tour: false,
    },
    Group {
        name: "rolling",
        summary: "rolling least squares over many series: the GPU walk, from host data, and the CPU",
        help: rolling::HELP,
        run: rolling::run,
        needs_gpu: true,
        in_quick_tour: false,
    },
    Group {
        name: "batch",
        summary: "B small problems in one batched CPU state vs a loop of single states and faer",
        help: batch::HELP,
        run: batch::run,
        needs_gpu: false,
        in_quick_tour: false,
    },
    Group {
        name: "python",
        summary: "the Rust side of scripts/python_overhead.py: one update pair, timed in Rust",
        help: python_overhead::HELP,
        run: python_overhead::run,
        needs_gpu: false,
        in_quick_tour: false,
    },
];

/// `cuqr bench --help`.
pub fn help() -> String {
    let mut s = String::from(
        "cuqr bench: GPU benchmarks against cuSOLVER in the same process, and the CPU backend\n\
         (the cuqr-bench program: cuqr-bench <GROUP> [OPTIONS] is the same)\n\n\
         Usage: cuqr bench <GROUP> [OPTIONS]   (cuqr bench <GROUP> --help)\n\
         \x20      cuqr bench --quick             every group's --quick run in turn; without a\n\
         \x20                                     GPU the groups that need one are skipped\n\n\
         Groups:\n",
    );
    for g in GROUPS {
        s.push_str(&format!("  {:<8} {}\n", g.name, g.summary));
    }
    s
}

/// Dispatches `cuqr bench <GROUP> ...`: the `cuqr-bench` program's entry point.
pub fn run(args: &[String]) -> CliResult<()> {
    let Some(name) = args.first() else {
        print!("{}", help());
        return Err("bench: no group given".into());
    };
    if cli::is_help(name) || (name == "--quick" && args[1..].iter().any(|a| cli::is_help(a))) {
        print!("{}", help());
        return Ok(());
    }
    if name == "--quick" {
        return quick_tour(&args[1..]);
    }
    let Some(g) = GROUPS.iter().find(|g| g.name == name) else {
        return Err(format!("bench: unknown group '{name}' (try cuqr bench --help)").into());
    };
    if args[1..].iter().any(|a| cli::is_help(a)) {
        print!("{}", g.help);
        return Ok(());
    }
    (g.run)(&args[1..])
}

/// `cuqr bench --quick`: every group's `--quick` run in turn, each under a heading.
/// Without a GPU the groups that need one are skipped with a line saying so, and the
/// others do what they do alone: `qr` says it has nothing to run, `updates` times
/// its CPU columns. The tour takes no options (a group's own come after its name).
fn quick_tour(args: &[String]) -> CliResult<()> {
    if let Some(a) = args.first() {
        return Err(format!(
            "bench --quick: unexpected argument '{a}' (the tour takes no options: give \
             them to one group, cuqr bench <GROUP> --quick ...)"
        )
        .into());
    }
    let names: Vec<&str> = GROUPS
        .iter()
        .filter(|g| g.in_quick_tour)
        .map(|g| g.name)
        .collect();
    println!(
        "cuqr bench --quick: each group's --quick run in turn ({})",
        names.join(", ")
    );
    // Whether a GPU opens (the groups open their own).
    let has_gpu = match cuqr::Gpu::new(0) {
        Ok(_) => true,
        Err(e) => {
            let gpu_only: Vec<&str> = GROUPS
                .iter()
                .filter(|g| g.needs_gpu)
                .map(|g| g.name)
                .collect();
            println!("no GPU ({e}): {} skipped (GPU only)", gpu_only.join(", "));
            false
        }
    };
    let quick = ["--quick".to_string()];
    for g in GROUPS.iter().filter(|g| g.in_quick_tour) {
        println!("\n## cuqr bench {} --quick\n", g.name);
        if g.needs_gpu && !has_gpu {
            println!("skipped: no GPU");
            continue;
        }
        (g.run)(&quick).map_err(|e| format!("bench {} --quick: {e}", g.name))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuqr_cli::cli::strs;

    #[test]
    fn unknown_group_is_an_error() {
        assert!(run(&strs(&["nope"])).is_err());
        assert!(run(&strs(&["--help"])).is_ok());
    }
}
