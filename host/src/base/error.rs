//! cuqr's one error type. Every fallible entry point returns
//! [`Result`]; a failed call leaves the factorisation state unchanged.

use core::fmt;

use cudarc::cublas::result::CublasError;
use cudarc::cusolver::result::CusolverError;
use cudarc::driver::DriverError;

use crate::base::params::QPolicy;

/// A failed call of a CUDA library: what was being done, and the library's own error
/// when it returned one (its [`source`](std::error::Error::source)). Displays as
/// "what: error", or "what" alone when the failure has no library error (a bad
/// `devInfo`, a launch the device cannot fit).
#[derive(Debug)]
pub struct CallError<E> {
    context: String,
    source: Option<E>,
}

impl<E> CallError<E> {
    /// The library's error `source`, met while doing `context`.
    pub fn new(context: impl Into<String>, source: E) -> Self {
        Self {
            context: context.into(),
            source: Some(source),
        }
    }

    /// What was being done.
    pub fn context(&self) -> &str {
        &self.context
    }

    /// The library's own error, when there is one.
    pub fn library_error(&self) -> Option<&E> {
        self.source.as_ref()
    }
}

/// A failure without a library error: the message alone.
impl<E> From<String> for CallError<E> {
    fn from(context: String) -> Self {
        Self {
            context,
            source: None,
        }
    }
}

/// A failure without a library error: the message alone.
impl<E> From<&str> for CallError<E> {
    fn from(context: &str) -> Self {
        Self::from(context.to_string())
    }
}

impl<E: fmt::Display> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(e) => write!(f, "{}: {e}", self.context),
            None => f.write_str(&self.context),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for CallError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

/// Everything that can go wrong in cuqr.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument has the wrong number of rows, columns or elements.
    #[error("{op}: {what} is {got}, expected {expected}")]
    Shape {
        /// Operation that rejected the argument.
        op: &'static str,
        /// Which dimension of which argument.
        what: &'static str,
        /// The size that was passed.
        got: usize,
        /// The size that was required.
        expected: usize,
    },
    /// A block position `k0..k0+p` does not fit the current dimension `n`
    /// (`n` is the column count for column updates, the row count for row updates).
    #[error("{op}: block k0={k0}, p={p} does not fit 0..{n}")]
    OutOfRange {
        /// Operation.
        op: &'static str,
        /// First index of the block (0-based).
        k0: usize,
        /// Block size.
        p: usize,
        /// The range limit.
        n: usize,
    },
    /// `p = 0`: an empty block is almost always a caller bug, so it is refused.
    #[error("{op}: empty block (p = 0)")]
    EmptyBlock {
        /// Operation.
        op: &'static str,
    },
    /// The update would leave fewer rows than columns (m < n).
    #[error("{op}: the result would have m = {m} rows < n = {n} columns")]
    Underdetermined {
        /// Operation.
        op: &'static str,
        /// Rows after the update.
        m: usize,
        /// Columns after the update.
        n: usize,
    },
    /// An input holds NaN or ±∞.
    #[error("{op}: {what} has a non-finite entry at ({row}, {col})")]
    NonFinite {
        /// Operation.
        op: &'static str,
        /// Which argument.
        what: &'static str,
        /// Row of the first bad entry.
        row: usize,
        /// Column of the first bad entry.
        col: usize,
    },
    /// The operation needs the explicit Q, but the state does not keep it.
    #[error("{op} needs Q; state was built with {policy:?}")]
    NeedsQ {
        /// Operation.
        op: &'static str,
        /// The state's Q policy.
        policy: QPolicy,
    },
    /// The operation needs data that the state does not hold.
    #[error("{op} needs {what}")]
    NeedsData {
        /// Operation.
        op: &'static str,
        /// What is missing and how to provide it.
        what: &'static str,
    },
    /// Removing a row failed: the rows left do not determine the factorisation to working
    /// precision (the state is unchanged).
    #[error("{op}: row {row} cannot be removed: {why}")]
    DowndateFailed {
        /// Operation.
        op: &'static str,
        /// The row (0-based, of the matrix before the operation).
        row: usize,
        /// Why.
        why: String,
    },
    /// The (updated) matrix is numerically rank deficient: |R_jj| ≤ tol.
    #[error("column {column} is numerically dependent: |r_jj| = {r_jj:e} <= {tol:e}")]
    RankDeficient {
        /// First column (0-based) whose diagonal entry is below the tolerance.
        column: usize,
        /// |R_jj|.
        r_jj: f64,
        /// The tolerance tol·‖A‖_F.
        tol: f64,
    },
    /// LU with partial pivoting met a pivot that is zero or negligible:
    /// |u_jj| ≤ tol, so the matrix is (numerically) singular (lu module).
    #[error("{op}: matrix is singular at column {column}: |u_jj| = {pivot:e} <= {tol:e}")]
    Singular {
        /// Operation.
        op: &'static str,
        /// First column (0-based) whose pivot is below the tolerance.
        column: usize,
        /// |u_jj| of that column.
        pivot: f64,
        /// The absolute tolerance tol·max|a_ij|.
        tol: f64,
    },
    /// Problems of a batch ([`crate::batch`]) refused a call that must change all of them or
    /// none (a factorisation, or an update that changes the shape): no problem changed.
    #[error("{op}: {} of the batch refused, so none changed", refusals(problems))]
    BatchRefused {
        /// Operation.
        op: &'static str,
        /// Each refusing problem (0-based) with its own error, in problem order.
        problems: Vec<(usize, Error)>,
    },
    /// An invalid parameter value (block size 0, negative tolerance, ...).
    #[error("{op}: invalid parameter {what}: {why}")]
    InvalidParam {
        /// Operation.
        op: &'static str,
        /// Parameter name.
        what: &'static str,
        /// Explanation.
        why: String,
    },
    /// An iterative solver (the mixed-precision least-squares refinement,
    /// docs/algorithms.md#mixed-precision)
    /// stopped without reaching its tolerance; no solution is returned.
    #[error("refinement did not converge after {iterations} iterations: backward error {backward_error:e}")]
    NotConverged {
        /// Refinement steps taken.
        iterations: usize,
        /// Normwise backward error of the last iterate.
        backward_error: f64,
    },
    /// No usable CUDA driver or device.
    #[error("no usable CUDA device: {0}")]
    NoDevice(String),
    /// A kernel the host needs is not in the embedded PTX.
    #[error("kernel {0} missing from the embedded PTX")]
    MissingKernel(String),
    /// Device memory could not be allocated.
    #[error("out of device memory: {what} needs {bytes} bytes")]
    OutOfMemory {
        /// What was being allocated.
        what: &'static str,
        /// Requested size.
        bytes: usize,
    },
    /// A CUDA driver call (or an NCCL call, whose errors are not `std` errors) failed.
    #[error("CUDA driver: {0}")]
    Driver(#[source] CallError<DriverError>),
    /// A cuBLAS call failed.
    #[error("cuBLAS: {0}")]
    Cublas(#[source] CallError<CublasError>),
    /// A cuSOLVER call failed or reported a bad `devInfo`.
    #[error("cuSOLVER: {0}")]
    Cusolver(#[source] CallError<CusolverError>),
    /// An earlier device fault left this GPU state's device memory untrustworthy (a
    /// fault of the context, or one part-way through an in-place write).
    #[error(
        "the GPU state is poisoned: a device fault hit it part-way through an update; \
         factorise the data again, or continue from a clone taken before (try_clone)"
    )]
    Poisoned,
}

impl Error {
    /// [`Error::Shape`]: `op` was given `got` where `expected` belongs (`what`).
    pub(crate) fn shape(op: &'static str, what: &'static str, got: usize, expected: usize) -> Self {
        Self::Shape {
            op,
            what,
            got,
            expected,
        }
    }

    /// [`Error::Driver`]: the driver's error `e` while doing `context`.
    pub fn driver(context: impl Into<String>, e: DriverError) -> Self {
        Self::Driver(CallError::new(context, e))
    }

    /// [`Error::Cublas`]: cuBLAS's error `e` while doing `context`.
    pub fn cublas(context: impl Into<String>, e: CublasError) -> Self {
        Self::Cublas(CallError::new(context, e))
    }

    /// [`Error::Cusolver`]: cuSOLVER's error `e` while doing `context`.
    pub fn cusolver(context: impl Into<String>, e: CusolverError) -> Self {
        Self::Cusolver(CallError::new(context, e))
    }
}

/// "problem i: error" for the first refusal, and how many more.
fn refusals(problems: &[(usize, Error)]) -> String {
    match problems {
        [] => "no problem".to_string(),
        [(i, e)] => format!("problem {i} ({e})"),
        [(i, e), rest @ ..] => format!("problem {i} ({e}) and {} more", rest.len()),
    }
}

/// `Result` with cuqr's [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;
