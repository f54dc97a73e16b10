"""GenEval-style detector metric (``metric=geneval``): prompt parsing, object detection
(``shapes``: classical image processing, no weights; ``owlv2``: transformers zero-shot
detection) and requirement checking. Importing it does not import torch.
"""

from .detectors import Detection, Detector, OwlDetector, ShapesDetector
from .metric import GenEvalMetric
from .parser import LMPromptParser, ObjectSpec, PromptParseError, PromptSpec, TemplateParser, parse_prompt
from .scoring import Check, check_requirements, fraction_met, relation_holds

__all__ = ["Detection", "Detector", "OwlDetector", "ShapesDetector", "GenEvalMetric", "LMPromptParser", "ObjectSpec",
           "PromptParseError", "PromptSpec", "TemplateParser", "parse_prompt", "Check", "check_requirements",
           "fraction_met", "relation_holds"]
