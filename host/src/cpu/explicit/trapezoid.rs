//! [`Trapezoid`]: R of explicit factors, stored by columns that end at their last
//! non-zero entry, so that R's zero rows below n cost nothing (the full kind's R is m×n
//! with at most n non-zero rows), a column goes in or out by moving n pointers, and a row
//! is added or dropped at the bottom (the only place the updates do) without copying R.

use rayon::prelude::*;

use crate::base::field::Field;

/// A rows×cols matrix whose column j holds its entries up to its last stored one; the
/// rest are zero.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Trapezoid<T> {
    rows: usize,
    cols: Vec<Vec<T>>,
}

/// The columns `cols` (R's columns from `c0` on), column c padded with zeros to at least
/// `len(c)` entries (≤ `rows`), as slices.
fn padded<'a, T: Field>(
    cols: &'a mut [Vec<T>],
    c0: usize,
    rows: usize,
    len: &impl Fn(usize) -> usize,
) -> Vec<&'a mut [T]> {
    cols.iter_mut()
        .enumerate()
        .map(|(i, c)| {
            let want = len(c0 + i);
            debug_assert!(want <= rows);
            if c.len() < want {
                c.resize(want, T::zero());
            }
            c.as_mut_slice()
        })
        .collect()
}

/// Drops `col`'s trailing zeros.
fn trim<T: Field>(col: &mut Vec<T>) {
    while col.last() == Some(&T::zero()) {
        col.pop();
    }
}

impl<T: Field> Trapezoid<T> {
    /// The matrix of column-major `data` (rows·cols entries, checked by the caller).
    pub fn from_col_major(rows: usize, cols: usize, data: &[T]) -> Self {
        debug_assert_eq!(data.len(), rows * cols);
        let cols = (0..cols)
            .map(|j| {
                let mut c = data[j * rows..(j + 1) * rows].to_vec();
                trim(&mut c);
                c
            })
            .collect();
        Self { rows, cols }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols.len()
    }

    /// The entries, column-major.
    pub fn to_col_major(&self) -> Vec<T> {
        let mut out = vec![T::zero(); self.rows * self.cols.len()];
        for (j, c) in self.cols.iter().enumerate() {
            out[j * self.rows..j * self.rows + c.len()].copy_from_slice(c);
        }
        out
    }

    #[cfg(test)]
    pub fn at(&self, i: usize, j: usize) -> T {
        debug_assert!(i < self.rows);
        self.cols[j].get(i).copied().unwrap_or(T::zero())
    }

    #[inline(always)]
    pub fn set(&mut self, i: usize, j: usize, x: T) {
        debug_assert!(i < self.rows);
        let c = &mut self.cols[j];
        if i < c.len() {
            c[i] = x;
            if i + 1 == c.len() {
                trim(c);
            }
        } else if x != T::zero() {
            c.resize(i, T::zero());
            c.push(x);
        }
    }

    /// Columns `c0..c1` at once, column c padded to at least `len(c)` entries (≤ rows);
    /// [`Trapezoid::trim_cols`] after.
    pub fn columns_mut(
        &mut self,
        c0: usize,
        c1: usize,
        len: impl Fn(usize) -> usize,
    ) -> Vec<&mut [T]> {
        padded(&mut self.cols[c0..c1], c0, self.rows, &len)
    }

    /// Runs `body(c0, columns c0..c0 + block)` on every block of `block` columns, each
    /// column padded to at least `len(c)` entries (≤ rows) first and trimmed after. The
    /// blocks are independent: with `parallel` they run over the CPU backend's threads.
    pub fn blocks_mut(
        &mut self,
        block: usize,
        len: impl Fn(usize) -> usize + Sync,
        parallel: bool,
        body: impl Fn(usize, &mut [&mut [T]]) + Sync,
    ) {
        let rows = self.rows;
        let run = |(b, chunk): (usize, &mut [Vec<T>])| {
            let c0 = b * block;
            let mut cols = padded(chunk, c0, rows, &len);
            body(c0, &mut cols);
            drop(cols);
            for c in chunk.iter_mut() {
                trim(c);
            }
        };
        if parallel {
            self.cols
                .par_chunks_mut(block.max(1))
                .enumerate()
                .for_each(run);
        } else {
            self.cols.chunks_mut(block.max(1)).enumerate().for_each(run);
        }
    }

    /// Drops the trailing zeros of columns `c0..c1`.
    pub fn trim_cols(&mut self, c0: usize, c1: usize) {
        for c in &mut self.cols[c0..c1] {
            trim(c);
        }
    }

    /// Inserts `col` (length rows) before column `k`.
    pub fn insert_col(&mut self, k: usize, col: &[T]) {
        debug_assert_eq!(col.len(), self.rows);
        let mut c = col.to_vec();
        trim(&mut c);
        self.cols.insert(k, c);
    }

    /// Removes column `k`.
    pub fn remove_col(&mut self, k: usize) {
        self.cols.remove(k);
    }

    /// Appends `row` (length cols) as the last row.
    pub fn push_row(&mut self, row: &[T]) {
        debug_assert_eq!(row.len(), self.cols.len());
        let t = self.rows;
        for (c, &x) in self.cols.iter_mut().zip(row) {
            if x != T::zero() {
                c.resize(t, T::zero());
                c.push(x);
            }
        }
        self.rows += 1;
    }

    /// Drops the last row (which the updates have decoupled: zero to working accuracy).
    pub fn pop_row(&mut self) {
        self.rows -= 1;
        let t = self.rows;
        for c in &mut self.cols {
            if c.len() > t {
                c.truncate(t);
                trim(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::field::c64;

    #[test]
    fn stores_only_up_to_the_last_non_zero() {
        let z = c64::new(0.0, 0.0);
        let v = |x: f64| c64::new(x, -x);
        // 4×3 upper trapezoidal
        let data = [
            v(1.0),
            z,
            z,
            z,
            v(2.0),
            v(3.0),
            z,
            z,
            v(4.0),
            v(5.0),
            v(6.0),
            z,
        ];
        let mut r = Trapezoid::from_col_major(4, 3, &data);
        assert_eq!(r.cols.iter().map(Vec::len).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(r.to_col_major(), data);
        r.push_row(&[z, v(7.0), z]);
        assert_eq!((r.rows(), r.at(4, 1), r.at(4, 2)), (5, v(7.0), z));
        r.set(4, 1, z);
        assert_eq!(r.cols[1].len(), 2);
        r.pop_row();
        r.insert_col(1, &[v(8.0), z, v(9.0), z]);
        assert_eq!(r.cols(), 4);
        assert_eq!(r.at(2, 1), v(9.0));
        r.remove_col(1);
        assert_eq!(r.to_col_major(), data);
    }
}
