"""Evaluation: datasets, metrics, the experiment runner and reports."""
