"""Embedding-correlation metrics: CLIPScore (open_clip, transformers), ALIGNScore, SigLIPScore."""
