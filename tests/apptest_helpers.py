"""Small helpers shared by the AppTest page tests: find a table, a row, assert a clean run."""

from __future__ import annotations

import pandas as pd


def frame(at, column: str) -> pd.DataFrame:
    """The first dataframe on the page with ``column``."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise AssertionError(f"no dataframe with column {column!r}; columns: {[list(d.value.columns) for d in at.dataframe]}")


def row(df: pd.DataFrame, first_col: str, label: str) -> pd.Series:
    """The one row of ``df`` whose ``first_col`` is ``label``."""
    hit = df[df[first_col] == label]
    assert len(hit) == 1, f"{label!r} not in {list(df[first_col])}"
    return hit.iloc[0]


def ok(at):
    """``at`` after asserting its last run raised nothing."""
    assert not at.exception, [e.value for e in at.exception]
    return at
