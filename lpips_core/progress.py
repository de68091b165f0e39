"""The one shape of a progress callback: ``progress(done, total)``.

Every long computation of the project (scoring a folder, explain, the Conventions grid, the
calibration lab, a study's preparation, the loss experiments) takes an optional
``progress(done, total)``: ``done`` of ``total`` units of work are finished (pairs, triplets,
steps — each function says which), so ``done / total`` is the fraction done. A caller that
wants to stop a computation that supports it (the loss experiments) returns ``False``; any
other return value is ignored.

:func:`report` calls a callback that may be ``None``; :func:`part` lets a step of a larger
computation report on the parent's scale.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["Progress", "part", "report"]

#: ``progress(done, total)``: ``done`` of ``total`` units finished; ``False`` asks to stop where supported.
Progress = Callable[[float, float], "bool | None"]


def report(progress: Progress | None, done: float, total: float) -> bool | None:
    """``progress(done, total)`` with ``done`` kept within ``[0, total]``; ``None`` when there is no callback."""
    if progress is None:
        return None
    return progress(min(max(done, 0), total), total)


def part(progress: Progress | None, start: float, stop: float, total: float) -> Progress | None:
    """A callback for one step of a larger computation: its own ``(done, total)`` is reported to
    ``progress`` as ``start + (stop − start) · done / total`` of the parent's ``total``."""
    if progress is None:
        return None
    return lambda d, t: report(progress, start + (stop - start) * (min(max(d / t, 0.0), 1.0) if t else 1.0), total)
