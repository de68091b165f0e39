"""lpips_core: an exact LPIPS library (reference ``lpips`` 0.1.4 numbers) for LPIPS Explorer.

Pure library: PyTorch, NumPy, Pillow, scikit-image; never Streamlit.
"""

from .model import LPIPS, Features, LPIPSResult, resolve_device
from .weights import WeightsUnavailable

__all__ = ["LPIPS", "Features", "LPIPSResult", "WeightsUnavailable", "resolve_device"]
__version__ = "0.1.0"
