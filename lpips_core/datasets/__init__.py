"""Whole datasets: pairs from folders, many metrics per pair, summaries, resumable and sharded runs.

- :mod:`.pairs`: :func:`match_folders` (two folders by name), :func:`all_pairs` (diversity),
  :func:`reference_pairs` (one reference against a folder), each a :class:`Discovery`.
- :mod:`lpips_core.spec`: :class:`MetricSpec` and names like ``"lpips-alex-0.1-lin-[-1,1]"``.
- :mod:`.score`: :func:`score_pairs` → :class:`ScoreResult` (rows + summary), :class:`Scorer`.
- :mod:`.store`: streamed CSV/JSONL tables, resume, :func:`merge_tables` for shards.
- :mod:`.explain`: :func:`explain` — which configuration reproduces a reported mean.
- :mod:`.ray_backend`: the same scoring on Ray Data (optional ``[ray]`` extra).
- the ``score``, ``diversity``, ``explain`` and ``merge`` subcommands sit on top, in :mod:`lpips_core.cli`.
"""

from .pairs import Discovery, Pair, all_pairs, match_folders, reference_pairs
from .score import ScoreResult, Scorer, score_pairs, summarize
from ..spec import MetricSpec, parse_spec, parse_specs
from .store import merge_tables, read_rows

__all__ = [
    "Discovery", "MetricSpec", "Pair", "ScoreResult", "Scorer", "all_pairs", "match_folders", "merge_tables",
    "parse_spec", "parse_specs", "read_rows", "reference_pairs", "score_pairs", "summarize",
]
