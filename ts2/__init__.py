"""ts2: validate text-to-image faithfulness metrics against T2IScoreScore semantic error graphs."""

__version__ = "0.1.0"
