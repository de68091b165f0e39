"""lpips_core: an exact LPIPS library (reference ``lpips`` 0.1.4 numbers) for LPIPS Explorer.

Pure library: PyTorch, NumPy, Pillow, scikit-image; never Streamlit. Every learned metric follows
one protocol (:mod:`lpips_core.protocol`); :mod:`lpips_core.metric_registry` builds them by name.
"""

from .model import LPIPS, LPIPSResult
from .protocol import Features, LearnedMetric, MetricResult, resolve_device
from .weights import WeightsUnavailable

__all__ = ["LPIPS", "Features", "LPIPSResult", "LearnedMetric", "MetricResult", "WeightsUnavailable", "resolve_device"]
__version__ = "0.1.0"
