//! Columns out of batched thin-Q states (docs/algorithms.md#thin-column-deletion).

use super::team::*;
use super::{NON_FINITE, OK, smem};
use crate::device::{self, Float};

/// Deletes columns k0..k0+p of every problem (docs/algorithms.md#thin-column-deletion, one
/// column at a time with Givens rotations): R loses column k0, which leaves it upper
/// Hessenberg from k0 on; rotations (j, j+1), j = k0 … n′−2, clear the subdiagonal from R's
/// rows and Q₁'s columns; the last row of R and the last column of Q₁ are dropped. b does not
/// change (the host keeps its buffer). Nothing can be refused but a non-finite result
/// ([`NON_FINITE`], outputs unwritten: the call is all-or-nothing).
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::delete_cols`]`(m, n)` elements; `q_in` B·m·n, `r_in`
/// B·n·n readable; `q_out` B·m·(n−p), `r_out` B·(n−p)², `status` B writable; B ≥ 1,
/// k0 + p ≤ n, p < n ≤ 32, m ≥ n; outputs overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn delete_cols<T: Float>(
    q_in: *const T,
    r_in: *const T,
    q_out: *mut T,
    r_out: *mut T,
    status: *mut u32,
    batch: usize,
    m: usize,
    n: usize,
    k0: usize,
    p: usize,
    team: usize,
) {
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, qs) = unsafe { setup::<T>(team, batch, smem::delete_cols(m, n)) };
    // SAFETY: inside the team's region.
    let (rs, rot) = unsafe {
        let rs = qs.add(m * n);
        (rs, rs.add(n * n))
    };
    // SAFETY: problem k at m×n (contract).
    unsafe { load_state(team, (q_in, r_in), (qs, m, rs), (k, m, n)) };
    let l = team.lane;
    for t in 0..p {
        // R is n × nc before this deletion (pitch n throughout).
        let nc = n - t;
        // SAFETY: every lane; R's columns (their owners' writes) are visible after it.
        unsafe { device::sync_warp() };
        // Column c takes column c + 1 (c ≥ k0): each row moved by the lane of its index
        // (rows < n ≤ team size), between two barriers.
        if l < n {
            let mut c = k0;
            while c + 1 < nc {
                // SAFETY: row l, columns c, c + 1 < nc ≤ n of rs.
                unsafe { device::st(rs, l * n + c, device::ld(rs, l * n + c + 1)) };
                c += 1;
            }
        }
        // SAFETY: every lane; the moved columns are visible to their owners after it.
        unsafe { device::sync_warp() };
        // Rotations (j, j+1) for j = k0 … nc−2 clear R(j+1, j) (columns < nc − 1).
        let mut j = k0;
        while j + 1 < nc {
            // SAFETY: convergent; rows j, j+1 < n; column j < nc − 1 ≤ team size.
            let (c, s) = unsafe { zeroing_rotation(team, rs, n, j, j + 1) };
            if l < nc - 1 {
                // SAFETY: own column.
                unsafe { rotate_col(team, rs, n, (j, j + 1), (c, s)) };
            }
            if l == j {
                // SAFETY: own column j.
                unsafe { device::st(rs, (j + 1) * n + j, T::ZERO) };
            }
            if l == 0 {
                // SAFETY: 2n rotation entries.
                unsafe {
                    device::st(rot, 2 * j, c);
                    device::st(rot, 2 * j + 1, s);
                }
            }
            j += 1;
        }
        // SAFETY: every lane; the rotations are visible after it.
        unsafe { device::sync_warp() };
        let mut i = l;
        while i < m {
            // SAFETY: own row i of the first nc columns of qs; rotations written above.
            unsafe {
                let mut j = k0;
                if j + 1 < nc {
                    let mut carry = device::ld(qs, j * m + i);
                    while j + 1 < nc {
                        let (c, s) = (device::ld(rot, 2 * j), device::ld(rot, 2 * j + 1));
                        let y = device::ld(qs, (j + 1) * m + i);
                        device::st(qs, j * m + i, c.mul_add(carry, s.mul(y)));
                        carry = c.mul_add(y, s.neg().mul(carry));
                        j += 1;
                    }
                    // Column nc − 1 is dropped.
                }
            }
            i += team.size;
        }
    }
    let no = n - p;
    // SAFETY: own rows and column of the working copy (the first no columns, rows of R
    // below no are dropped); every lane votes.
    let fine = unsafe {
        let mine =
            finite_rows(team, (qs, m), (m, no)) && (l >= no || finite_col_pitch(team, rs, (n, no)));
        team.all(mine)
    };
    if valid && fine {
        // SAFETY: problem k's outputs at m×no and no×no.
        unsafe {
            store_q(team, (qs, m), q_out, (k, m, no));
            if l < no {
                for row in 0..no {
                    let v = if row <= l {
                        device::ld(rs, row * n + l)
                    } else {
                        T::ZERO
                    };
                    device::st(r_out, k * no * no + row * no + l, v);
                }
            }
        }
    }
    if valid && l == 0 {
        // SAFETY: k < B.
        unsafe { device::st(status, k, if fine { OK } else { NON_FINITE }) };
    }
}
