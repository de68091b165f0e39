"""The reference article's full toy 2AFC, computed once per test session and shared by the files
that need it (test_calibration.py: the library and the CLI; test_page_calibration.py: the page).

The run (5 stand-ins, 600 + 600 triplets, 300 Adam steps) takes 40–70 s on the 2-core CI machine.
:func:`article_2afc` computes it with :func:`lpips_explorer.calibration.run_2afc`'s defaults, which
test_calibration.py's ``test_2afc_table`` checks against the article's printed table;
:func:`serving_article_2afc` stands in for ``run_2afc`` in the CLI and the page: it records each
call's settings and answers a call with exactly the defaults from that one cached run (any other
call runs the real function), so those tests check which settings the caller used *and* what it
shows, without running the experiment again.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from lpips_explorer.calibration import TwoAFCResult, twoafc

#: Arguments of ``run_2afc`` that do not change its result.
_NOT_SETTINGS = ("progress", "threads")


@functools.cache
def article_2afc() -> TwoAFCResult:
    """``run_2afc()`` with its defaults (the article's settings), computed once per process."""
    return twoafc.run_2afc()


def _settings(bound: inspect.BoundArguments) -> dict[str, Any]:
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if k not in _NOT_SETTINGS}


def serving_article_2afc(calls: list[dict[str, Any]]) -> Callable[..., TwoAFCResult]:
    """A ``run_2afc`` that appends each call's settings to ``calls`` and serves the article's run
    from :func:`article_2afc` when the settings are exactly the defaults (``test=None``)."""
    real = twoafc.run_2afc
    signature = inspect.signature(real)
    defaults = _settings(signature.bind())

    def run(**kwargs) -> TwoAFCResult:
        settings = _settings(signature.bind(**kwargs))
        calls.append(settings)
        if settings != defaults:
            return real(**kwargs)
        if kwargs.get("progress") is not None:
            kwargs["progress"](1, 1)  # progress(done, total): finished
        return article_2afc()

    return run
