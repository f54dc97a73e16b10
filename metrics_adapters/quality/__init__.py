"""No-reference image-quality metrics, for quality-aware composites (:mod:`..composite`).

- :class:`BlurEffect` (``quality=blur``): the no-reference perceptual blur metric of Crete-Roffet
  et al. (2007), scikit-image's ``skimage.measure.blur_effect`` on scipy alone (it runs on the
  light install); classical, no weights, works offline. 0 = sharp, 1 = blurred (lower is better).
- :class:`PyIQAMetric` (``quality=pyiqa``): any no-reference model of the ``pyiqa`` toolbox
  (MANIQA, as the VQA+NR-IQA paper uses, MUSIQ, CLIP-IQA, BRISQUE, NIQE, ...); weights come from
  the hub on first use, so it needs network once. Optional extra ``ts2[iqa]``.

Why not ``piq`` or the ``brisque`` package: piq's BRISQUE downloads its SVM from GitHub at run
time (not offline), and ``brisque`` 0.2.0 (which ships its SVM) fails on numpy 2 (it converts
one-element arrays with ``float()``).
"""

from .blur import BlurEffect
from .pyiqa_metric import PyIQAMetric

__all__ = ["BlurEffect", "PyIQAMetric"]
