//! [`BatchRef`]: B matrices of one shape r×c read through explicit strides, so that a
//! NumPy C-order (B, r, c) array, B column-major matrices one after another, or a list of
//! [`MatRef`]s are all read in place.
#![forbid(unsafe_code)]

use std::borrow::Cow;

use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::base::scalar::Scalar;

/// A borrowed batch of B matrices, each r×c: the per-problem data of a batched call
/// ([`BatchQr`](super::BatchQr)).
///
/// Element (i, j) of matrix k is `data[k·batch_stride + i·row_stride + j·col_stride]`
/// (strides in elements). A matrix whose rows are contiguous (row stride 1, as in
/// [`BatchRef::col_major`], or any column vector) reaches the update as a view; any other
/// layout ([`BatchRef::row_major`] with c > 1) is gathered one problem at a time into a
/// small r×c buffer by the thread that updates that problem.
///
/// # Examples
/// ```
/// use cuqr::batch::BatchRef;
/// // NumPy's C-order array of shape (2, 3, 2): two 3×2 matrices
/// let data: Vec<f64> = (0..12).map(|x| x as f64).collect();
/// let a = BatchRef::row_major(&data, 2, 3, 2)?;
/// assert_eq!((a.batch(), a.nrows(), a.ncols()), (2, 3, 2));
/// assert_eq!(a.get(1, 2, 0), Some(10.0)); // matrix 1, row 2, column 0
/// // the same numbers read as two column-major 3×2 matrices
/// let b = BatchRef::col_major(&data, 2, 3, 2)?;
/// assert_eq!(b.get(1, 2, 0), Some(8.0));
/// # Ok::<(), cuqr::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct BatchRef<'a, T> {
    layout: Layout<'a, T>,
    batch: usize,
    nrows: usize,
    ncols: usize,
}

impl<T: Scalar> core::fmt::Debug for BatchRef<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BatchRef")
            .field("batch", &self.batch)
            .field("nrows", &self.nrows)
            .field("ncols", &self.ncols)
            .finish_non_exhaustive()
    }
}

/// Where the elements live.
#[derive(Clone, Copy)]
enum Layout<'a, T> {
    /// One slice with (batch, row, column) strides.
    Strided { data: &'a [T], strides: [usize; 3] },
    /// One view per matrix.
    Mats(&'a [MatRef<'a, T>]),
}

/// One problem's block: a view of the caller's memory, or a gathered copy.
pub(crate) enum Block<'a, T> {
    View(MatRef<'a, T>),
    Owned(Mat<T>),
}

impl<T: Scalar> Block<'_, T> {
    /// The block as a view.
    pub(crate) fn view(&self) -> MatRef<'_, T> {
        match self {
            Block::View(v) => *v,
            Block::Owned(m) => m.as_ref(),
        }
    }
}

const OP: &str = "BatchRef";

impl<'a, T: Scalar> BatchRef<'a, T> {
    /// B = `batch` matrices r×c over `data` with `strides` = [batch, row, column] stride in
    /// elements.
    ///
    /// # Errors
    /// [`Error::Shape`] if `data` is shorter than the last element's index + 1;
    /// [`Error::InvalidParam`] if that index overflows `usize`.
    pub fn new(
        data: &'a [T],
        batch: usize,
        nrows: usize,
        ncols: usize,
        strides: [usize; 3],
    ) -> Result<Self> {
        let need = if batch == 0 || nrows == 0 || ncols == 0 {
            0
        } else {
            let last = [
                (batch, strides[0]),
                (nrows, strides[1]),
                (ncols, strides[2]),
            ]
            .iter()
            .try_fold(0usize, |acc, &(len, s)| {
                (len - 1).checked_mul(s).and_then(|x| acc.checked_add(x))
            });
            match last.and_then(|x| x.checked_add(1)) {
                Some(need) => need,
                None => {
                    return Err(Error::InvalidParam {
                        op: OP,
                        what: "strides",
                        why: format!(
                            "the last element of {batch}×{nrows}×{ncols} with strides \
                             {strides:?} lies beyond usize"
                        ),
                    })
                }
            }
        };
        if data.len() < need {
            return Err(Error::shape(OP, "data length", data.len(), need));
        }
        Ok(Self {
            layout: Layout::Strided { data, strides },
            batch,
            nrows,
            ncols,
        })
    }

    /// NumPy's C order, shape (B, r, c): strides [r·c, c, 1]. `data` must hold exactly
    /// B·r·c elements.
    ///
    /// # Errors
    /// [`Error::Shape`] if `data.len() ≠ B·r·c`; [`Error::InvalidParam`] on overflow.
    pub fn row_major(data: &'a [T], batch: usize, nrows: usize, ncols: usize) -> Result<Self> {
        let stride = checked_len(batch, nrows, ncols, data.len())?;
        Self::new(data, batch, nrows, ncols, [stride, ncols, 1])
    }

    /// B column-major r×c matrices one after another (NumPy's Fortran order of shape
    /// (r, c, B) transposed to (B, r, c)): strides [r·c, 1, r]. `data` must hold exactly
    /// B·r·c elements.
    ///
    /// # Errors
    /// [`Error::Shape`] if `data.len() ≠ B·r·c`; [`Error::InvalidParam`] on overflow.
    pub fn col_major(data: &'a [T], batch: usize, nrows: usize, ncols: usize) -> Result<Self> {
        let stride = checked_len(batch, nrows, ncols, data.len())?;
        Self::new(data, batch, nrows, ncols, [stride, 1, nrows])
    }

    /// B = `mats.len()` views of one shape (an empty list is a batch of 0×0 matrices).
    ///
    /// # Errors
    /// [`Error::Shape`] if the views' shapes differ.
    pub fn from_mats(mats: &'a [MatRef<'a, T>]) -> Result<Self> {
        let (nrows, ncols) = mats.first().map_or((0, 0), |m| (m.nrows(), m.ncols()));
        for m in mats {
            if m.nrows() != nrows {
                return Err(Error::shape(OP, "rows of a matrix", m.nrows(), nrows));
            }
            if m.ncols() != ncols {
                return Err(Error::shape(OP, "columns of a matrix", m.ncols(), ncols));
            }
        }
        Ok(Self {
            layout: Layout::Mats(mats),
            batch: mats.len(),
            nrows,
            ncols,
        })
    }

    /// Number B of matrices.
    pub fn batch(&self) -> usize {
        self.batch
    }
    /// Rows r of each matrix.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Columns c of each matrix.
    pub fn ncols(&self) -> usize {
        self.ncols
    }

    /// The B × r × c values in row-major (C) order, borrowed when the view is laid out
    /// that way already.
    pub(crate) fn row_major_slice(&self) -> Option<&'a [T]> {
        let (b, r, c) = (self.batch, self.nrows, self.ncols);
        match self.layout {
            Layout::Strided { data, strides }
                if (b <= 1 || strides[0] == r * c)
                    && (r <= 1 || strides[1] == c)
                    && (c <= 1 || strides[2] == 1) =>
            {
                data.get(..b * r * c)
            }
            _ => None,
        }
    }

    /// Element (i, j) of matrix k, `None` out of range.
    pub fn get(&self, k: usize, i: usize, j: usize) -> Option<T> {
        if k >= self.batch || i >= self.nrows || j >= self.ncols {
            return None;
        }
        Some(match self.layout {
            Layout::Strided { data, strides } => {
                data[k * strides[0] + i * strides[1] + j * strides[2]]
            }
            Layout::Mats(mats) => mats[k].get(i, j),
        })
    }

    /// Matrix k (< B) as an owned copy, `None` out of range.
    pub fn to_mat(&self, k: usize) -> Option<Mat<T>> {
        (k < self.batch).then(|| self.block(k).view().to_owned())
    }

    /// Matrix k (< B, checked by the caller): a view where its rows are contiguous, else a
    /// gathered copy.
    pub(crate) fn block(&self, k: usize) -> Block<'a, T> {
        let (r, c) = (self.nrows, self.ncols);
        match self.layout {
            Layout::Mats(mats) => Block::View(mats[k]),
            Layout::Strided { data, strides } => {
                let [bs, rs, cs] = strides;
                if r > 0 && c > 0 && (r == 1 || rs == 1) && (c == 1 || cs >= r) {
                    let ld = if c == 1 { r } else { cs };
                    if let Ok(v) = MatRef::new(&data[k * bs..], r, c, ld) {
                        return Block::View(v);
                    }
                }
                Block::Owned(Mat::from_fn(r, c, |i, j| data[k * bs + i * rs + j * cs]))
            }
        }
    }

    /// Column vector k (an r×1 matrix, checked by the caller) as a slice: borrowed where
    /// its elements are contiguous.
    pub(crate) fn vector(&self, k: usize) -> Cow<'a, [T]> {
        match self.block(k) {
            Block::View(v) if self.ncols == 1 => Cow::Borrowed(v.col(0)),
            b => Cow::Owned(b.view().col(0).to_vec()),
        }
    }
}

/// B·r·c, checked against `len`: the batch stride r·c.
fn checked_len(batch: usize, nrows: usize, ncols: usize, len: usize) -> Result<usize> {
    let stride = nrows.checked_mul(ncols);
    let total = stride.and_then(|s| s.checked_mul(batch));
    let (Some(stride), Some(total)) = (stride, total) else {
        return Err(Error::InvalidParam {
            op: OP,
            what: "shape",
            why: format!("{batch}×{nrows}×{ncols} elements overflow usize"),
        });
    };
    if len != total {
        return Err(Error::shape(OP, "data length", len, total));
    }
    Ok(stride)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_read_the_same_matrix() {
        let data: Vec<f64> = (0..24).map(|x| x as f64).collect();
        let rm = BatchRef::row_major(&data, 2, 3, 4).unwrap();
        let cm = BatchRef::col_major(&data, 2, 3, 4).unwrap();
        assert!(matches!(rm.block(1), Block::Owned(_)));
        assert!(matches!(cm.block(1), Block::View(_)));
        for k in 0..2 {
            let (a, b) = (rm.to_mat(k).unwrap(), cm.to_mat(k).unwrap());
            for i in 0..3 {
                for j in 0..4 {
                    assert_eq!(a[(i, j)], data[k * 12 + i * 4 + j]);
                    assert_eq!(b[(i, j)], data[k * 12 + i + j * 3]);
                }
            }
        }
        // a column vector of a C-order (B, r, 1) array is borrowed
        let v = BatchRef::row_major(&data, 4, 6, 1).unwrap();
        assert!(matches!(v.vector(2), Cow::Borrowed(s) if s == &data[12..18]));
        assert_eq!(v.get(4, 0, 0), None);
    }

    #[test]
    fn bad_lengths_and_strides_are_errors() {
        let data = [1.0f32; 10];
        assert!(matches!(
            BatchRef::row_major(&data, 2, 2, 3),
            Err(Error::Shape {
                got: 10,
                expected: 12,
                ..
            })
        ));
        assert!(matches!(
            BatchRef::new(&data, 2, 2, 2, [7, 2, 1]),
            Err(Error::Shape {
                got: 10,
                expected: 11,
                ..
            })
        ));
        assert!(BatchRef::new(&data, 2, 2, 2, [6, 1, 2]).is_ok());
        assert!(matches!(
            BatchRef::new(&data, 3, 2, 2, [usize::MAX, 1, 2]),
            Err(Error::InvalidParam { .. })
        ));
        assert!(matches!(
            BatchRef::row_major(&data, usize::MAX, 2, 2),
            Err(Error::InvalidParam { .. })
        ));
        // nothing to read: any data will do
        assert!(BatchRef::new(&data[..0], 5, 0, 3, [7, 7, 7]).is_ok());
        let (a, b) = (Mat::<f32>::zeros(2, 2), Mat::<f32>::zeros(2, 3));
        let views = [a.as_ref(), b.as_ref()];
        assert!(matches!(
            BatchRef::from_mats(&views),
            Err(Error::Shape {
                what: "columns of a matrix",
                ..
            })
        ));
    }
}
