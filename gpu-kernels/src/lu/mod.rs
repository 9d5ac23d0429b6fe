//! LU with partial pivoting (docs/algorithms.md#lu-factorisation, as corrected in
//! docs/algorithms.md#corrections-to-the-published-descriptions): the column
//! step of the panel — pivot search (first index of max |·|, block argmax), row swap
//! within the panel, scaling and rank-1 update — and the row interchanges applied
//! across whole column ranges (laswp). Column-major throughout; pivots are absolute
//! 0-based row indices (`u32`).

pub(crate) mod argmax;
mod coop;
mod laswp;
pub(crate) mod slab;
mod step;

pub use coop::panel_coop;
pub use laswp::{LASWP_TILE_COLS, laswp, laswp_tile};
pub use step::{panel_fused, pivot, update};
