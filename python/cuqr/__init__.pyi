"""Type stubs of the cuqr package (see the docstrings in cuqr/__init__.py)."""

from typing import Any, Literal, Optional, Sequence, Tuple, Union

import numpy as np

ArrayLike = Any  # NumPy array (or array-like), CuPy array, PyTorch tensor
Which = Literal["row", "col"]

__version__: str

def cuda_available(device: int = 0) -> bool: ...
def qr_insert(
    Q: ArrayLike,
    R: ArrayLike,
    u: ArrayLike,
    k: int,
    which: Which = "row",
    rcond: Optional[float] = None,
    overwrite_qru: bool = False,
    check_finite: bool = True,
) -> Tuple[ArrayLike, ArrayLike]: ...
def qr_delete(
    Q: ArrayLike,
    R: ArrayLike,
    k: int,
    p: int = 1,
    which: Which = "row",
    overwrite_qr: bool = False,
    check_finite: bool = True,
) -> Tuple[ArrayLike, ArrayLike]: ...
def qr_update(
    Q: ArrayLike,
    R: ArrayLike,
    u: ArrayLike,
    v: ArrayLike,
    overwrite_qruv: bool = False,
    check_finite: bool = True,
) -> Tuple[ArrayLike, ArrayLike]: ...
def cholupdate(
    R: ArrayLike, x: ArrayLike, sign: Literal["+", "-"] = "+", check_finite: bool = True
) -> ArrayLike: ...

class QR:
    def __init__(
        self,
        A: ArrayLike,
        b: Optional[ArrayLike] = None,
        q: Optional[Literal["thin", "full"]] = "thin",
        keep_data: bool = False,
        device: str = "auto",
    ) -> None: ...
    def insert_cols(self, k: int, U: ArrayLike) -> None: ...
    def delete_cols(self, k: int, p: int = 1) -> None: ...
    def insert_rows(self, k: int, U: ArrayLike, e: Optional[ArrayLike] = None) -> None: ...
    def delete_rows(
        self, k: int, p: int = 1, rows: Optional[ArrayLike] = None, rhs: Optional[ArrayLike] = None
    ) -> None: ...
    def rank_one(self, u: ArrayLike, v: ArrayLike) -> None: ...
    def rank_k(self, U: ArrayLike, V: ArrayLike) -> None: ...
    def replace_cols(self, k: int, U: ArrayLike) -> None: ...
    def shift_col(self, source: int, target: int) -> None: ...
    def slide(
        self,
        rows: ArrayLike,
        rhs: Optional[ArrayLike] = None,
        drop: Optional[int] = None,
        forget: Optional[float] = None,
    ) -> None: ...
    def solve(self, residuals: bool = False) -> Union[ArrayLike, Tuple[ArrayLike, Sequence[float]]]: ...
    @property
    def R(self) -> ArrayLike: ...
    @property
    def Q(self) -> Optional[ArrayLike]: ...
    @property
    def d(self) -> ArrayLike: ...
    @property
    def shape(self) -> Tuple[int, int]: ...
    @property
    def device(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def q(self) -> Optional[Literal["thin", "full"]]: ...
    def diagnostics(self, A: ArrayLike, b: Optional[ArrayLike] = None) -> dict: ...
    def drift(self) -> dict: ...
    def check_drift(self) -> dict: ...
