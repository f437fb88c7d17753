"""Critique parsing and scoring: pure functions over model outputs and probabilities."""
