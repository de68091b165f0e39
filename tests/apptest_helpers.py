"""Small helpers shared by the AppTest page tests: find a table, a row, assert a clean run."""

from __future__ import annotations

import pandas as pd


def frame(at, column: str) -> pd.DataFrame:
    """The first dataframe on the page with ``column``; else the first ``st.table`` with it (its index,
    e.g. the row labels, as a column)."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    for t in at.table:
        if column in t.value.columns:
            return t.value.reset_index()
    raise AssertionError(f"no dataframe or table with column {column!r}; columns: "
                         f"{[list(d.value.columns) for d in [*at.dataframe, *at.table]]}")


def table(at, column: str) -> pd.DataFrame:
    """The first ``st.table`` on the page with ``column`` (its data, before the table's display format)."""
    for t in at.table:
        if column in t.value.columns:
            return t.value
    raise AssertionError(f"no table with column {column!r}; columns: {[list(t.value.columns) for t in at.table]}")


def row(df: pd.DataFrame, first_col: str, label: str) -> pd.Series:
    """The one row of ``df`` whose ``first_col`` is ``label``."""
    hit = df[df[first_col] == label]
    assert len(hit) == 1, f"{label!r} not in {list(df[first_col])}"
    return hit.iloc[0]


def ok(at):
    """``at`` after asserting its last run raised nothing."""
    assert not at.exception, [e.value for e in at.exception]
    return at
