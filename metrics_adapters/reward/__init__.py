"""Reward models that are not dual encoders (ImageReward); PickScore and HPSv2 live in ``embedding``."""
