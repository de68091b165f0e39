""""Fit our own LPIPS": the class's answers as a 2AFC set, lin weights fitted to them, and the
cross-validated agreement of ours, the published weights and the baseline
(:mod:`lpips_core.twoafc` does the work; this module only turns a study into its inputs).

The triplets are the PNGs the students saw (decoded as :func:`lpips_explorer.study.prepare.decode_png`
does); ``h`` is each triplet's share of votes for the second copy (can't tell: half a vote each
side, :func:`lpips_explorer.study.scoring.judge_fractions`); triplets nobody answered are left out.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from lpips_core import twoafc
from lpips_core.backbones import LAYER_NAMES
from lpips_core.weights import lin_weights

from .prepare import decode_png
from .scoring import judge_fractions

__all__ = ["class_set", "fit_class"]


def class_set(rows: Sequence[Any], judgements: Sequence[Any]) -> twoafc.TwoAFCSet:
    """The study's answered triplets as a :class:`lpips_core.twoafc.TwoAFCSet`.

    Raises:
        ValueError: no triplet has an answer yet.
    """
    fr = judge_fractions([j.triplet for j in judgements], [j.choice for j in judgements])
    by_index = {r.index: r for r in rows if r.ref_png is not None}
    idx = [i for i in sorted(fr) if i in by_index]
    if not idx:
        raise ValueError("no triplet has an answer yet")
    ref, p0, p1 = ([decode_png(getattr(by_index[i], f"{k}_png")) for i in idx] for k in ("ref", "p0", "p1"))
    return twoafc.TwoAFCSet(ref, p0, p1, np.array([fr[i][0] for i in idx]), [f"triplet {i + 1}" for i in idx])


def fit_class(model, rows: Sequence[Any], judgements: Sequence[Any], *, version: str = "0.1",
              folds: int = 5, per: str = "layer", strength: float = 0.1) -> dict:
    """Fit lin weights of ``model``'s backbone to the class's answers and score them honestly.

    Args:
        model: an LPIPS model of the backbone (its own lin weights are not used).
        folds: cross-validation folds (at most the answered triplets).

    Returns:
        ``{"triplets", "judges", "layers": [{"layer", "published", "fitted"}], "cross_validation",
        "weights" (the file's bytes), "seconds"}``; per layer the mean channel weight.
    """
    data = class_set(rows, judgements)
    t0, t1, sizes = twoafc.channel_terms(model, data)
    published = np.concatenate([w.numpy().astype(np.float64) for w in lin_weights(model.net, version)])
    n = len(data)
    cv = twoafc.cross_validate(t0, t1, data.h, sizes, published=published, folds=max(2, min(folds, n)),
                               per=per, strength=strength) if n >= 2 else None
    fit = twoafc.fit_lin(t0, t1, data.h, sizes, published=published, per=per, strength=strength)
    pub = np.split(published, np.cumsum(sizes)[:-1])
    layers = [{"layer": name, "published": float(p.mean()), "fitted": float(w.mean())}
              for name, p, w in zip(LAYER_NAMES[model.net], pub, fit.weights)]
    return {"triplets": n, "judges": len({j.session for j in judgements}), "layers": layers,
            "cross_validation": cv, "weights": twoafc.lin_bytes(fit.weights), "net": model.net,
            "settings": fit.settings, "seconds": fit.seconds}
