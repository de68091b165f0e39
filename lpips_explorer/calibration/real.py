"""The toy 2AFC scored with the real, pretrained LPIPS (baseline and lin)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from lpips_core.metric_registry import NET_LABELS
from lpips_core.model import LPIPS
from lpips_core.progress import part, report
from lpips_core.spec import MetricSpec, parse_spec
from lpips_explorer.calibration.common import Progress, _int, _to_net
from lpips_explorer.calibration.triplets import Triplets
from lpips_explorer.calibration.twoafc import Accuracy, _accuracy, score_2afc

__all__ = ["REAL_NETS", "RealLPIPSResult", "real_lpips_2afc", "score_lpips_2afc"]

#: The pretrained backbones the lab scores the toy 2AFC with (the paper's two main ones), in order.
REAL_NETS: tuple[str, ...] = ("alex", "vgg")


@dataclass(frozen=True, eq=False)
class RealLPIPSResult:
    """The toy 2AFC scored with a pretrained LPIPS backbone.

    Attributes:
        net, version: the configuration.
        baseline: accuracy with every channel weighted 1 (``lin=False``); ``None`` if unavailable.
        lin: accuracy with the published lin weights; ``None`` if unavailable.
        note: where the weights came from, or why they are unavailable.
    """

    net: str
    version: str
    baseline: Accuracy | None
    lin: Accuracy | None
    note: str

    @property
    def available(self) -> bool:
        return self.baseline is not None

    @property
    def label(self) -> str:
        return f"LPIPS {NET_LABELS.get(self.net, self.net)} v{self.version}"

    def rows(self) -> dict[str, Accuracy]:
        """``"LPIPS AlexNet v0.1, baseline"`` / ``", lin"`` → accuracy (empty when unavailable)."""
        out = {}
        if self.baseline is not None:
            out[f"{self.label}, baseline"] = self.baseline
        if self.lin is not None:
            out[f"{self.label}, lin"] = self.lin
        return out


def score_lpips_2afc(model: LPIPS, test: Triplets, *, chunk: int = 50,
                     progress: Progress | None = None) -> tuple[Accuracy, Accuracy | None]:
    """Score the test triplets with a real LPIPS model: ``(baseline, lin)``.

    One pass through the backbone gives both: the baseline sums the per-channel terms
    (:meth:`LPIPS.channel_terms`), lin weights them with :attr:`LPIPS.channel_weights`
    (``None`` when the model was built with ``lin=False``). Inputs are the triplets in
    ``[-1, 1]`` at their native size. ``chunk`` triplets go through the network at a time;
    ``progress(done, total)`` counts triplets scored.
    """
    chunk = _int(chunk, "chunk", lo=1)
    weights = model.channel_weights
    v = None if weights is None else torch.cat([w.detach().float().cpu() for w in weights])
    d = {"base": ([], []), "lin": ([], [])}
    n = len(test)
    for start in range(0, n, chunk):
        sl = slice(start, min(n, start + chunk))
        r, a, b = (_to_net(arr[sl]) for arr in (test.ref, test.x0, test.x1))
        fr = model.features(r)
        for j, other in enumerate((a, b)):
            terms = torch.cat(model.channel_terms(fr, model.features(other)), 1)
            d["base"][j].append(terms.sum(1))
            if v is not None:
                d["lin"][j].append(terms @ v)
        report(progress, sl.stop, n)
    base = _accuracy(score_2afc(torch.cat(d["base"][0]), torch.cat(d["base"][1]), test.h), test.kind)
    lin = None
    if v is not None:
        lin = _accuracy(score_2afc(torch.cat(d["lin"][0]), torch.cat(d["lin"][1]), test.h), test.kind)
    return base, lin


def real_lpips_2afc(test: Triplets, models: Mapping[MetricSpec | str, LPIPS | None], *,
                    progress: Progress | None = None) -> dict[str, RealLPIPSResult]:
    """:func:`score_lpips_2afc` with each model of ``models``: an LPIPS spec with lin weights
    (``"lpips-alex"``, ``MetricSpec("lpips", net="vgg", version="0.0")``) → its model, as the
    caller built or cached it (nothing is built here). Results are keyed by backbone.

    A ``None`` model (its weights unavailable) gives a result with ``baseline = lin = None``.
    ``progress(done, total)`` counts triplets over every model.

    Raises:
        ValueError: a spec that is not LPIPS with lin weights. TypeError: a model that is not its spec's.
    """
    out = {}
    n = len(test) * len(models)
    for k, (spec, model) in enumerate(models.items()):
        spec = parse_spec(spec)
        if not isinstance(model, (LPIPS, type(None))) or not spec.lin:
            raise ValueError(f"real_lpips_2afc scores LPIPS with lin weights; got {spec.name}")
        if model is None:
            out[spec.net] = RealLPIPSResult(spec.net, spec.version, None, None, "weights unavailable")
            report(progress, (k + 1) * len(test), n)
            continue
        spec.check_model(model)
        base, lin = score_lpips_2afc(model, test, progress=part(progress, k * len(test), (k + 1) * len(test), n))
        out[spec.net] = RealLPIPSResult(spec.net, spec.version, base, lin, f"weights: {model.weights}")
    return out
