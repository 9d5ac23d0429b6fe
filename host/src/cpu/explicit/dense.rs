//! [`Dense`]: a column-major matrix of field elements that can grow and shrink by a row
//! or a column, the storage of explicit factors.

use super::QStore;
use crate::base::error::Result;
use crate::base::field::Field;
use crate::base::rotation_chain::ChainRotation;
use crate::base::scalar::Scalar;

/// A column-major `rows × cols` matrix.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Dense<T> {
    rows: usize,
    cols: usize,
    data: Vec<T>,
}

impl<T: Field> Dense<T> {
    /// A matrix over column-major `data` (`data.len() == rows * cols`, checked by the
    /// caller).
    pub fn from_col_major(rows: usize, cols: usize, data: Vec<T>) -> Self {
        debug_assert_eq!(data.len(), rows * cols);
        Self { rows, cols, data }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// The entries, column-major.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }

    #[inline(always)]
    pub fn at(&self, i: usize, j: usize) -> T {
        self.data[i + j * self.rows]
    }
    pub fn col(&self, j: usize) -> &[T] {
        &self.data[j * self.rows..(j + 1) * self.rows]
    }
    /// Two distinct columns, mutably.
    pub fn two_cols_mut(&mut self, a: usize, b: usize) -> (&mut [T], &mut [T]) {
        debug_assert_ne!(a, b);
        let m = self.rows;
        let (lo, hi, swap) = if a < b { (a, b, false) } else { (b, a, true) };
        let (head, tail) = self.data.split_at_mut(hi * m);
        let (x, y) = (&mut head[lo * m..(lo + 1) * m], &mut tail[..m]);
        if swap {
            (y, x)
        } else {
            (x, y)
        }
    }

    /// Inserts `col` (length `rows`) before column `k`.
    pub fn insert_col(&mut self, k: usize, col: &[T]) {
        debug_assert_eq!(col.len(), self.rows);
        let at = k * self.rows;
        self.data.splice(at..at, col.iter().copied());
        self.cols += 1;
    }

    /// Removes column `k`.
    pub fn remove_col(&mut self, k: usize) {
        let at = k * self.rows;
        self.data.drain(at..at + self.rows);
        self.cols -= 1;
    }

    /// Inserts `row` (length `cols`) before row `k`.
    pub fn insert_row(&mut self, k: usize, row: &[T]) {
        debug_assert_eq!(row.len(), self.cols);
        let m = self.rows + 1;
        let mut data = Vec::with_capacity(m * self.cols);
        for (j, &x) in row.iter().enumerate() {
            let col = &self.data[j * self.rows..(j + 1) * self.rows];
            data.extend_from_slice(&col[..k]);
            data.push(x);
            data.extend_from_slice(&col[k..]);
        }
        self.data = data;
        self.rows = m;
    }

    /// Removes row `k`.
    pub fn remove_row(&mut self, k: usize) {
        let m = self.rows;
        let mut data = Vec::with_capacity((m - 1) * self.cols);
        for col in self.data.chunks_exact(m) {
            data.extend_from_slice(&col[..k]);
            data.extend_from_slice(&col[k + 1..]);
        }
        self.data = data;
        self.rows = m - 1;
    }

    /// Qᴴx for this matrix as Q (`x` of length `rows`).
    pub fn adjoint_times(&self, x: &[T]) -> Vec<T> {
        (0..self.cols).map(|j| dot_conj(self.col(j), x)).collect()
    }

    /// y ← y − Q·c (`c` of length `cols`).
    pub fn sub_times(&self, c: &[T], y: &mut [T]) {
        for (j, &cj) in c.iter().enumerate() {
            for (yi, &qi) in y.iter_mut().zip(self.col(j)) {
                *yi -= qi * cj;
            }
        }
    }
}

impl<T: Field> QStore<T> for Dense<T> {
    fn rows(&self) -> usize {
        self.rows
    }
    fn cols(&self) -> usize {
        self.cols
    }
    fn rotate(&mut self, rot: ChainRotation<T>) -> Result<()> {
        let (x, y) = self.two_cols_mut(rot.top, rot.bot);
        for (a, b) in x.iter_mut().zip(y.iter_mut()) {
            (*a, *b) = rot.apply_to_pair(*a, *b);
        }
        Ok(())
    }
    fn adjoint_times(&mut self, x: &[T]) -> Result<Vec<T>> {
        Ok(Dense::adjoint_times(self, x))
    }
    fn sub_times(&mut self, c: &[T], y: &mut [T]) -> Result<()> {
        Dense::sub_times(self, c, y);
        Ok(())
    }
    fn reflect_cols(&mut self, first: usize, v: &[T], tau: T::Real) -> Result<()> {
        let m = self.rows;
        let mut z = vec![T::zero(); m];
        for (j, &vj) in v.iter().enumerate() {
            for (zi, &qi) in z.iter_mut().zip(self.col(first + j)) {
                *zi += qi * vj;
            }
        }
        for (j, &vj) in v.iter().enumerate() {
            let f = vj.conj().scale(tau);
            let at = (first + j) * m;
            for (qi, &zi) in self.data[at..at + m].iter_mut().zip(&z) {
                *qi -= zi * f;
            }
        }
        Ok(())
    }
    fn push_col(&mut self, col: &[T]) -> Result<()> {
        self.insert_col(self.cols, col);
        Ok(())
    }
    fn pop_col(&mut self) -> Result<()> {
        self.remove_col(self.cols - 1);
        Ok(())
    }
    fn insert_zero_row(&mut self, k: usize) -> Result<()> {
        self.insert_row(k, &vec![T::zero(); self.cols]);
        Ok(())
    }
    fn remove_row(&mut self, k: usize) -> Result<()> {
        Dense::remove_row(self, k);
        Ok(())
    }
    fn row(&mut self, k: usize) -> Result<Vec<T>> {
        Ok((0..self.cols).map(|j| self.at(k, j)).collect())
    }
    fn snapshot(&self) -> Result<Self> {
        Ok(self.clone())
    }
    fn row_norms(&mut self) -> Result<Vec<T::Real>> {
        Ok((0..self.rows)
            .map(|i| {
                (0..self.cols).fold(<T::Real as Scalar>::ZERO, |a, j| {
                    a.hypot(self.at(i, j).modulus())
                })
            })
            .collect())
    }
}

/// xᴴy.
pub(crate) fn dot_conj<T: Field>(x: &[T], y: &[T]) -> T {
    x.iter()
        .zip(y)
        .fold(T::zero(), |acc, (&a, &b)| acc + a.conj() * b)
}

/// ‖x‖₂, scaled against overflow and underflow.
pub(crate) fn norm<T: Field>(x: &[T]) -> T::Real {
    use crate::base::scalar::Scalar;
    // scaled by the largest part (no hypot per element: that dominated long vectors)
    let big = x.iter().fold(<T::Real as Scalar>::ZERO, |a, &v| {
        a.max(v.re().abs()).max(v.im().abs())
    });
    if big == <T::Real as Scalar>::ZERO || !big.is_finite() {
        return big;
    }
    let inv = <T::Real as Scalar>::ONE / big;
    let sum = x.iter().fold(<T::Real as Scalar>::ZERO, |a, &v| {
        let (r, i) = (v.re() * inv, v.im() * inv);
        a + r * r + i * i
    });
    big * sum.sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_columns_in_and_out() {
        let mut a = Dense::from_col_major(2, 2, vec![1.0f64, 2.0, 3.0, 4.0]);
        a.insert_row(1, &[9.0, 8.0]);
        assert_eq!(a.as_slice(), &[1.0, 9.0, 2.0, 3.0, 8.0, 4.0]);
        a.insert_col(0, &[5.0, 6.0, 7.0]);
        assert_eq!((a.rows(), a.cols()), (3, 3));
        assert_eq!(a.at(2, 0), 7.0);
        a.remove_row(0);
        a.remove_col(2);
        assert_eq!(a.as_slice(), &[6.0, 7.0, 9.0, 2.0]);
        let (x, y) = a.two_cols_mut(1, 0);
        assert_eq!((x[0], y[0]), (9.0, 6.0));
    }

    #[test]
    fn norm_does_not_overflow() {
        assert_eq!(norm(&[3e300f64, 4e300]), 5e300);
        assert_eq!(norm::<f64>(&[]), 0.0);
    }
}
