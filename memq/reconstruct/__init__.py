"""Reconstruction: recalled statements -> one SPARQL query, in the order the pipeline runs it.

* :mod:`memq.reconstruct.reconstructor`: the :class:`Reconstructor`, which renames and refills a
  statement's variables into a :class:`Draft` query (UNION, FILTER, ORDER BY/LIMIT), with the filter
  expressions of :mod:`memq.reconstruct.filters`;
* :mod:`memq.reconstruct.ground`: step choice and grounding, which recalled statements each step keeps
  (those that bind in the KG given the steps before them);
* :mod:`memq.reconstruct.assemble`: every step's choice -> the final query, and the answers named and ordered;
* :mod:`memq.reconstruct.repair`: self-repair when the query finds nothing.

Nothing here imports the planner: the grounded planner (:mod:`memq.plan.grounded`) drafts with the
:class:`Reconstructor`, and :mod:`memq.pipeline` runs the stages after it.
"""

from __future__ import annotations

from .filters import ORDERING, language_filter, value_comparators, with_comparator
from .reconstructor import XSD_DATETIME, Draft, Reconstructor, with_order

__all__ = ["ORDERING", "XSD_DATETIME", "Draft", "Reconstructor", "language_filter",
           "value_comparators", "with_comparator", "with_order"]
