"""Semantic error graphs (SEGs): data model, loaders, validation and the bundled synthetic set.

This package imports neither torch nor any other package of the project.
"""

from .graph import build_graph, levels_present, ts2_convention_edges, walks
from .loaders import load_path
from .model import SEG, ImageRecord, LabelError, SEGDataset, parse_label
from .seg_format import load_seg_file, save_seg_file
from .ts2_release import TS2_SUBSETS, load_ts2, load_ts2_release, ts2_subset
from .validate import Problem, SEGValidationError, validate_dataset, validate_seg

__all__ = [
    "SEG", "SEGDataset", "ImageRecord", "LabelError", "parse_label",
    "walks", "build_graph", "ts2_convention_edges", "levels_present",
    "load_path", "load_seg_file", "save_seg_file", "load_ts2", "load_ts2_release", "ts2_subset", "TS2_SUBSETS",
    "Problem", "SEGValidationError", "validate_seg", "validate_dataset",
]
