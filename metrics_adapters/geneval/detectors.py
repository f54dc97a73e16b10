"""Object detectors of the GenEval-style metric: images (+ object names) in, boxes out.

Two backends behind :class:`Detector`:

``shapes`` (:class:`ShapesDetector`)
    Classical image processing for flat-coloured shape scenes (the bundled synthetic set), no
    weights: the background is the most common border colour; every other pixel is named by
    :mod:`~metrics_adapters.geneval.colours`; each colour's pixels are split into connected
    components (:func:`scipy.ndimage.label`, 8-connected); each component large enough is one
    object, its shape told from its geometry -- fill ratio (area / box area) and solidity (area /
    convex hull area): a square fills its box, a circle fills pi/4 of it, a triangle about half
    and is convex, a star is far from convex. It sees only pixels.
``owlv2`` (:class:`OwlDetector`)
    Open-vocabulary detection with transformers (``AutoModelForZeroShotObjectDetection``, e.g.
    ``google/owlv2-base-patch16-ensemble``) queried with the prompt's object names; the colour of
    each box is named from its crop (pixels unlike the crop's border, i.e. a rough foreground
    mask, as GenEval masks the background before classifying colour).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..hub import HubModel, load_pretrained
from .colours import COLOUR_NAMES, colour_index, dominant_colour

__all__ = ["Detection", "Detector", "ShapesDetector", "OwlDetector", "classify_shape", "SHAPE_NAMES", "DETECTORS",
           "build_detector"]

log = logging.getLogger(__name__)

SHAPE_NAMES = ("circle", "square", "triangle", "star")


@dataclass(frozen=True)
class Detection:
    """One detected object: ``label`` (object name), box ``(x0, y0, x1, y1)`` in pixels (inclusive
    for the shapes backend), detector ``score``, named ``colour`` (or ``None``) and pixel ``area``."""

    label: str
    box: tuple[float, float, float, float]
    score: float = 1.0
    colour: str | None = None
    area: float | None = None

    @property
    def centre(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.box
        return (x0 + x1) / 2.0, (y0 + y1) / 2.0

    @property
    def size(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.box
        return x1 - x0, y1 - y0

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "box": [round(float(v), 1) for v in self.box], "score": round(float(self.score), 4),
                "colour": self.colour}


class Detector(ABC):
    """Finds objects in images. ``queries[i]`` are the object names the prompt of image ``i``
    asks for (open-vocabulary detectors use them; closed ones may ignore them)."""

    @abstractmethod
    def settings(self) -> dict[str, Any]:
        """Everything that changes detections (model id, thresholds, ...)."""

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:  # noqa: B027 - optional
        pass

    def hub_models(self) -> tuple[HubModel, ...]:
        """Hub repositories :meth:`load` reads (see :meth:`metrics_adapters.base.Metric.hub_models`)."""
        return ()

    def unload(self) -> None:  # noqa: B027 - optional
        pass

    @abstractmethod
    def detect(self, images: Sequence[Any], queries: Sequence[Sequence[str]]) -> list[list[Detection]]:
        """Detections per image."""

    def vocabulary(self) -> frozenset[str] | None:
        """Object names this detector can find (``None``: open vocabulary)."""
        return None

    def flops_per_image(self) -> float | None:
        return None

    def model_ids(self) -> dict[str, Any]:
        return {}


# ------------------------------------------------------------------------------------------------
# shapes
# ------------------------------------------------------------------------------------------------
def _hull_area(mask: np.ndarray) -> float:
    """Area of the convex hull of a component's pixels (as unit squares, so a full box has the
    box's area and solidity of a filled square is exactly 1)."""
    from scipy.spatial import ConvexHull, QhullError

    ys, xs = np.nonzero(mask)
    pts = np.concatenate([np.stack([xs + dx, ys + dy], 1) for dx in (0, 1) for dy in (0, 1)])
    try:
        return float(ConvexHull(pts).volume)
    except QhullError:  # degenerate (a line of pixels)
        return float(mask.sum())


def classify_shape(mask: np.ndarray) -> tuple[str, dict[str, float]]:
    """Shape name of one component's boolean mask (cropped to its box), and the features used.

    Rules, in order (``fill`` = area / box area, ``solidity`` = area / hull area, ``aspect`` =
    min(w, h) / max(w, h)):

    - ``solidity < 0.8``: star (the only non-convex shape);
    - ``fill >= 0.9`` and ``aspect >= 0.8``: square;
    - ``fill >= 0.68``: circle (pi/4 = 0.785 of its box);
    - otherwise: triangle (1/2 of its box).

    Examples
    --------
    >>> classify_shape(np.ones((10, 10), bool))[0]
    'square'
    """
    m = np.asarray(mask, dtype=bool)
    h, w = m.shape
    area = float(m.sum())
    fill = area / float(h * w)
    solidity = area / max(_hull_area(m), 1.0)
    aspect = min(h, w) / max(h, w)
    feats = {"fill": round(fill, 3), "solidity": round(solidity, 3), "aspect": round(aspect, 3)}
    if solidity < 0.8:
        return "star", feats
    if fill >= 0.9 and aspect >= 0.8:
        return "square", feats
    if fill >= 0.68:
        return "circle", feats
    return "triangle", feats


class ShapesDetector(Detector):
    """Flat-coloured shapes from pixels (see the module docstring).

    Parameters
    ----------
    min_area : int
        Components smaller than this many pixels are noise, not objects.
    background_tolerance : int
        A pixel within this max-channel distance of the background colour is background.
    image_side : int
        Side in pixels of the images scored, for the cost estimate only (the bundled synthetic
        scenes are 128 px). The detector has no weights, so its cost is per pixel:
        :attr:`OPS_PER_PIXEL` covers the background test, colour naming against the palette and
        connected-component labelling.
    """

    OPS_PER_PIXEL = 100.0

    def __init__(self, min_area: int = 20, background_tolerance: int = 24, image_side: int = 128) -> None:
        self.min_area = int(min_area)
        self.background_tolerance = int(background_tolerance)
        self.image_side = int(image_side)

    def flops_per_image(self) -> float | None:
        return self.OPS_PER_PIXEL * self.image_side ** 2

    def settings(self) -> dict[str, Any]:
        return {"detector": "shapes", "version": 1, "min_area": self.min_area,
                "background_tolerance": self.background_tolerance}

    def vocabulary(self) -> frozenset[str]:
        return frozenset(SHAPE_NAMES)

    @staticmethod
    def background(arr: np.ndarray) -> np.ndarray:
        """The most common colour of the image border."""
        border = np.concatenate([arr[0], arr[-1], arr[:, 0], arr[:, -1]]).reshape(-1, 3)
        cols, counts = np.unique(border, axis=0, return_counts=True)
        return cols[counts.argmax()]

    def detect_one(self, image: Any) -> list[Detection]:
        from scipy import ndimage

        arr = np.asarray(image.convert("RGB") if hasattr(image, "convert") else image, dtype=np.uint8)
        if arr.ndim != 3 or arr.shape[2] != 3:
            raise ValueError(f"expected an RGB image, got an array of shape {arr.shape}")
        bg = self.background(arr).astype(np.int16)
        fg = np.abs(arr.astype(np.int16) - bg).max(-1) > self.background_tolerance
        names = colour_index(arr)
        out: list[Detection] = []
        structure = np.ones((3, 3), bool)  # 8-connected: thin star tips stay attached
        for ci in np.unique(names[fg]):
            labels, n = ndimage.label(fg & (names == ci), structure=structure)
            if n == 0:
                continue
            for k, sl in enumerate(ndimage.find_objects(labels), start=1):
                comp = labels[sl] == k
                area = int(comp.sum())
                if area < self.min_area:
                    continue
                shape, _ = classify_shape(comp)
                ys, xs = sl
                out.append(Detection(shape, (float(xs.start), float(ys.start), float(xs.stop - 1), float(ys.stop - 1)),
                                     1.0, COLOUR_NAMES[int(ci)], float(area)))
        out.sort(key=lambda d: (d.box[1], d.box[0]))
        return out

    def detect(self, images: Sequence[Any], queries: Sequence[Sequence[str]]) -> list[list[Detection]]:
        return [self.detect_one(im) for im in images]


# ------------------------------------------------------------------------------------------------
# OWLv2 (transformers zero-shot detection)
# ------------------------------------------------------------------------------------------------
def crop_colour(arr: np.ndarray, box: Sequence[float], tolerance: int = 40) -> str | None:
    """Colour name of the object in ``box``: the dominant name among crop pixels unlike the
    crop's border colour (a rough foreground mask; all pixels when nothing stands out)."""
    h, w = arr.shape[:2]
    x0, y0 = max(0, int(np.floor(box[0]))), max(0, int(np.floor(box[1])))
    x1, y1 = min(w, int(np.ceil(box[2])) + 1), min(h, int(np.ceil(box[3])) + 1)
    crop = arr[y0:y1, x0:x1]
    if crop.size == 0:
        return None
    border = np.concatenate([crop[0], crop[-1], crop[:, 0], crop[:, -1]]).reshape(-1, 3).astype(np.int16)
    ref = np.median(border, axis=0)
    fg = np.abs(crop.astype(np.int16) - ref).max(-1) > tolerance
    px = crop[fg] if fg.sum() >= max(4, 0.05 * fg.size) else crop.reshape(-1, 3)
    return dominant_colour(px)


class OwlDetector(Detector):
    """Open-vocabulary detection with a transformers zero-shot detector (OWLv2 / OWL-ViT).

    Parameters
    ----------
    model : str
        Hub id or local folder (``google/owlv2-base-patch16-ensemble``).
    revision : str, optional
    threshold : float
        Minimum box score (GenEval uses 0.3 for everything but counting).
    query_template : str
        How an object name becomes a text query (``"a photo of a {}"``).
    nms_iou : float or None
        Class-wise non-maximum suppression IoU (``None``: off, as GenEval).
    """

    def __init__(self, model: str = "google/owlv2-base-patch16-ensemble", revision: str | None = None,
                 threshold: float = 0.3, query_template: str = "a photo of a {}", nms_iou: float | None = None,
                 colour_tolerance: int = 40) -> None:
        self.model_name = str(model)
        self.revision = revision
        self.threshold = float(threshold)
        self.query_template = str(query_template)
        self.nms_iou = None if nms_iou is None else float(nms_iou)
        self.colour_tolerance = int(colour_tolerance)
        self.model = None
        self.processor = None
        self.device = "cpu"
        self._n_params = None

    def settings(self) -> dict[str, Any]:
        # version 2: the weights load in the run's dtype (fp16/bf16 on CUDA), not fp32 under autocast.
        return {"detector": "owlv2", "version": 2, "model": self.model_name, "revision": self.revision, "threshold": self.threshold,
                "query_template": self.query_template, "nms_iou": self.nms_iou,
                "colour": {"method": "hsv-crop", "tolerance": self.colour_tolerance}}

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        if self.model is not None:
            return
        from transformers import AutoModelForZeroShotObjectDetection, AutoProcessor

        self.model, self.processor = load_pretrained(
            AutoModelForZeroShotObjectDetection, AutoProcessor, self.model_name, revision=self.revision, device=device,
            dtype=dtype, owner="GenEval detector", option="metric.detector.model")
        self.device = device
        self._n_params = float(sum(p.numel() for p in self.model.parameters()))

    def unload(self) -> None:
        self.model = None
        self.processor = None

    def model_ids(self) -> dict[str, Any]:
        return {"detector": self.model_name, "revision": self.revision}

    def hub_models(self) -> tuple[HubModel, ...]:
        return (HubModel(self.model_name, "model", self.revision),)

    def flops_per_image(self) -> float | None:
        if self._n_params is None or self.model is None:
            return None
        vc = self.model.config.vision_config
        tokens = (vc.image_size // vc.patch_size) ** 2 + 1
        return 2.0 * self._n_params * tokens

    def detect(self, images: Sequence[Any], queries: Sequence[Sequence[str]]) -> list[list[Detection]]:
        import torch

        if self.model is None:
            self.load()
        out: list[list[Detection]] = []
        # One image at a time: each has its own query list (OWL pads queries per batch otherwise).
        for img, names in zip(images, queries, strict=True):
            names = list(dict.fromkeys(names))
            if not names:
                out.append([])
                continue
            texts = [[self.query_template.format(n) for n in names]]
            enc = self.processor(text=texts, images=[img], return_tensors="pt")
            # Pixels in the weights' dtype (fp16/bf16 when the run asks for it), ids as they are.
            enc = {k: (v.to(self.device, self.model.dtype) if v.is_floating_point() else v.to(self.device))
                   if hasattr(v, "to") else v for k, v in enc.items()}
            with torch.inference_mode():
                raw = self.model(**enc)
            w, h = img.size
            # OWLv2 pads images to a square before resizing: boxes come back in the padded frame,
            # so post-process against the square side and clip to the real image.
            side = max(w, h) if "owlv2" in type(self.model).__name__.lower() else None
            target = [(side, side)] if side else [(h, w)]
            res = self.processor.post_process_grounded_object_detection(raw, threshold=self.threshold,
                                                                        target_sizes=target)[0]
            arr = np.asarray(img.convert("RGB"))
            dets = []
            for box, score, lab in zip(res["boxes"].tolist(), res["scores"].tolist(), res["labels"].tolist(), strict=True):
                x0, y0, x1, y1 = (max(0.0, box[0]), max(0.0, box[1]), min(w - 1.0, box[2]), min(h - 1.0, box[3]))
                if x1 <= x0 or y1 <= y0:
                    continue
                dets.append(Detection(names[int(lab)], (x0, y0, x1, y1), float(score),
                                      crop_colour(arr, (x0, y0, x1, y1), self.colour_tolerance), None))
            if self.nms_iou is not None:
                dets = _nms(dets, self.nms_iou)
            out.append(dets)
        return out


def _iou(a: Sequence[float], b: Sequence[float]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _nms(dets: list[Detection], iou: float) -> list[Detection]:
    """Class-wise greedy non-maximum suppression."""
    keep: list[Detection] = []
    for d in sorted(dets, key=lambda d: -d.score):
        if all(k.label != d.label or _iou(k.box, d.box) <= iou for k in keep):
            keep.append(d)
    return keep


# Detector backends by name (``metric.detector=shapes``); lazy "module:attr" entries.
from ..registry import Registry  # noqa: E402 - after the classes it names

DETECTORS = Registry("detector")
DETECTORS.register("shapes", "metrics_adapters.geneval.detectors:ShapesDetector")
DETECTORS.register("owlv2", "metrics_adapters.geneval.detectors:OwlDetector")


def build_detector(spec: Any) -> Detector:
    """A detector from a name in :data:`DETECTORS`, a config mapping with ``_target_``, or itself.

    Raises
    ------
    UnknownMetricError
        An unknown name (the message lists the valid ones).
    TypeError
        Anything that does not build a :class:`Detector`.
    """
    if isinstance(spec, Detector):
        return spec
    if isinstance(spec, str):
        det = DETECTORS.get(spec)()
    elif isinstance(spec, dict) or hasattr(spec, "keys"):
        from hydra.utils import instantiate

        det = instantiate(spec)
    else:
        det = spec
    if not isinstance(det, Detector):
        raise TypeError(f"expected a detector name in {DETECTORS.names()}, a detector config or a Detector, got {spec!r}")
    return det
