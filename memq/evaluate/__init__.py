"""Evaluation: metrics (Hits@1, F1, EHR, GED), runs over datasets, reports."""

from .metrics import best_over_parses, ehr, ged, hits_at_1, prf

__all__ = ["best_over_parses", "ehr", "ged", "hits_at_1", "prf"]
