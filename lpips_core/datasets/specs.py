"""Kept for imports written before :mod:`lpips_core.spec` held :class:`MetricSpec`."""

from ..spec import CLASSIC, MetricSpec, parse_spec, parse_specs

__all__ = ["CLASSIC", "MetricSpec", "parse_spec", "parse_specs"]
