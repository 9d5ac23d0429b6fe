//! The help texts of the `cuqr` tool's commands.

/// `cuqr --help`.
pub const MAIN_HELP: &str = "\
cuqr: QR factorisation and QR updating (insert/delete rows and columns,
rank-one and rank-k changes, sliding windows) for least-squares problems, on
NVIDIA GPUs or the CPU.

Usage: cuqr <COMMAND> [OPTIONS]

Commands:
  update   factorise A from a .npy file, apply one update, write R, Q, x
           and a JSON summary
  window   least squares over a sliding window of the rows of A, x after
           every step
  rolling  rolling least squares of one or many series (statsmodels'
           RollingOLS), coefficients of every window
  dist     least squares with A's rows over several GPUs (NCCL): factorize, window
  demo     a regression run on synthetic data: updates versus
           refactorising from scratch, with timings and accuracy
  bench    GPU benchmarks against cuSOLVER: runs the cuqr-bench program
           (cuqr bench --help)
  help     print this help, or the help of a command (cuqr help update)

Options:
  -h, --help     print help (also after a command: cuqr update --help)
  -V, --version  print the version

Errors are one line on stderr, `cuqr: error: ...`, with exit status 2.
";

/// `cuqr update --help`.
pub const UPDATE_HELP: &str = "\
cuqr update: factorise A = QR, apply one update, solve the least-squares problem.

Usage: cuqr update --a A.npy --op OP [--k0 K] [--p P] [--u U.npy] [--v v.npy]
                   [--e e.npy] [--to J] [--b b.npy] [--q-policy full|thin|none]
                   [--precision f64|f32] [--backend auto|cpu|gpu] [--threads N]
                   --out DIR

Inputs (.npy, float64 or float32, C or Fortran order, 1-D or 2-D):
  --a A.npy        the m x n matrix, m >= n (a 1-D array is one column)
  --b b.npy        right-hand sides, length m or m x q (default: ones)

Operations (--op), positions 0-based:
  insert-cols  --k0 K --u U.npy       U (m x p; 1-D = one column) becomes
                                      columns K..K+p-1 (needs Q)
  delete-cols  --k0 K [--p P]         delete columns K..K+P-1 (P default 1)
  insert-rows  --k0 K --u U.npy [--e e.npy]
                                      U (p x n; 1-D = one row) becomes rows
                                      K..K+p-1, with right-hand sides e
                                      (p or p x q; default ones)
  delete-rows  --k0 K [--p P]         delete rows K..K+P-1 (needs Q)
  rank-one     --u u.npy --v v.npy    A + u v^T, u of length m, v of length n
                                      (needs Q; --k0 is accepted and ignored)
  rank-k       --u U.npy --v V.npy    A + U V^T, U m x k, V n x k (needs Q)
  replace-cols --k0 K --u U.npy       U (m x p) overwrites columns K..K+p-1
                                      (needs Q)
  shift-col    --k0 K --to J          column K moves to position J (needs Q)
  --p may be given for insert-cols/insert-rows and must then match U.

Options:
  --q-policy full|thin|none
                         thin: Q1, m x n, R n x n and b (default); full: the
                         explicit m x m Q; none: R, d and the A and b read
                         (the operations marked 'needs Q' use them)
  --precision f64|f32    working precision (default f64); inputs are converted
  --backend auto|cpu|gpu auto: the GPU when usable, else the CPU (default auto)
  --threads N            threads of the CPU backend (default: all cores)
  --out DIR              output folder, created if missing

Outputs in DIR:
  R.npy          updated R: m' x n' upper trapezoidal (full), n' x n' (thin, none)
  Q.npy          updated Q: m' x m' (full) or Q1, m' x n' (thin)
  x.npy          least-squares solution, n' (or n' x q when b is 2-D)
  summary.json   m, n (after the update), q, op, k0, p, backend, precision,
                 q_policy, residual_norm, residual_norms, e_Q, e_A (null
                 without Q), e_x, e_gram, l_norm, timings_ms {factorize,
                 update, solve}
Arrays are written in Fortran order, float64 or float32 as --precision.

Complex data: when A.npy is complex128 or complex64 the explicit factors are
updated (complex128 under --precision f64, complex64 under f32; U, v, e and b
may be real or complex): insert-cols, delete-cols, insert-rows, delete-rows,
rank-one (A + u v^H) and rank-k (A + U V^H), with --q-policy thin or full; A
may also have fewer rows than columns (full Q; no x is then written).
Outputs are complex, and summary.json's e_x, e_gram and l_norm are null.
";

/// `cuqr window --help`.
pub const WINDOW_HELP: &str = "\
cuqr window: least squares over a sliding window of observations.

Usage: cuqr window --a A.npy [--b b.npy] --window W --step P
                   [--q-policy thin|none|full] [--forget L] [--check-every N]
                   [--precision f64|f32] [--backend auto|cpu|gpu] --out DIR

Factorises the first W rows of A (M x n) and b (M or M x q; default ones), then
slides the window P rows a step: the next P rows enter, the oldest P leave,
until the rows of A run out ((M - W) / P steps). After each step it solves the
window's least-squares problem.

Options:
  --window W             rows in the window, n <= W <= M
  --step P               rows in and out per step, P >= 1
  --q-policy thin|none|full
                         thin: Q1 (m x n), R and b (default); none: R and d with
                         the window's rows kept for the downdate; full: m x m Q
  --forget L             forgetting factor in (0, 1]: before each step R and d
                         are scaled by sqrt(L), so a row k steps old weighs L^k
                         (default 1)
  --check-every N        drift check after every N-th step (default 32; 0: off)
  --precision f64|f32    working precision (default f64)
  --backend auto|cpu|gpu auto: the GPU when usable, else the CPU (default auto)
  --out DIR              output folder, created if missing

Outputs in DIR:
  x.npy          steps x (n*q): row s is the solution after step s (the n
                 entries of each right-hand side in turn)
  R.npy, Q.npy   the final R, and Q (Q1 for thin) when the state holds it
  summary.json   steps, window, step, n, q, q_policy, forget, backend, device,
                 precision, factorize_ms, median_step_ms, median_solve_ms,
                 refreshes, drift_checks, drift_estimate, final_residual_norms
";

/// `cuqr demo --help`.
pub const DEMO_HELP: &str = "\
cuqr demo: a least-squares regression run on synthetic data.

Usage: cuqr demo [--backend auto|cpu|gpu] [--precision f64|f32] [--seed N]
                 [--size small|default] [--threads N]

Generates observations X (m x n) and responses y = X beta + noise with a known
coefficient vector beta (built-in PRNG, --seed, default 42), factorises X,
then adds a batch of observations, drops a variable, adds variables, drops
observations and applies a rank-one correction (a variable rescaled). After
each step it prints the update time, the time to refactorise the updated
matrix from scratch on the same backend, the speed-up, the residual norm
||X x - y||, e_x (relative difference to the refactorised solution) and
e_A = ||Q R - X||_F / ||X||_F.

Options:
  --size small|default   default: 1500 x 150; small: 241 x 29 (for tests)
  --seed N               PRNG seed (default 42)
  --precision f64|f32    working precision (default f64)
  --backend auto|cpu|gpu default auto
  --threads N            threads of the CPU backend (default: all cores)
";

/// `cuqr rolling --help`.
pub const ROLLING_HELP: &str = "\
cuqr rolling: rolling least squares of one or many series.

Usage: cuqr rolling --y Y.npy --x X.npy --window W [--min-nobs N] [--expanding]
                    [--forget L] [--missing drop|skip|raise]
                    [--precision f64|f32] [--backend cpu|auto|gpu] --out DIR

For every time step t and every series, the least-squares coefficients of the
W observations ending at t (statsmodels' RollingOLS), by QR updating: the new
observation enters the window's R by Givens rotations, the oldest leaves by a
downdate (a refused downdate refactorises the window from its data).

Options:
  --y Y.npy              T observations (1-D) or T x S (S series side by side)
  --x X.npy              the T x k design shared by every series (add a column of
                         ones for an intercept)
  --window W             observations per window, W >= 1
  --min-nobs N           finite observations a window needs, k <= N <= W
                         (default k)
  --expanding            also estimate the shorter windows at the start, once
                         they hold N observations
  --forget L             forgetting factor in (0, 1] inside each window: an
                         observation a steps old weighs L^a (default 1)
  --missing drop|skip|raise
                         rows with NaN or inf: left out of the windows (drop,
                         default), NaN for windows holding one (skip), or an
                         error (raise)
  --precision f64|f32    working precision (default f64)
  --backend cpu|auto|gpu where to run (default cpu): gpu runs on GPU 0 (one
                         thread per series and time segment; k <= 16, more runs
                         on the CPU with a note), auto takes GPU 0 when
                         T x S x k^2 >= 2.5e7 and one opens, else the CPU
  --out DIR              output folder, created if missing

Outputs in DIR:
  params.npy     T x k (1-D y) or T x S x k, C order: NaN where a window has
                 no estimate (before the first window, too few observations,
                 rank deficient)
  rss.npy        T or T x S: the residual sum of squares of each window
  summary.json   sizes, windows estimated, refactorisations, time
";
