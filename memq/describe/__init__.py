"""describe: statement -> English descriptions (MemQ paper section 4.1, Appendix B).

>>> from memq.describe import TemplateDescriber
>>> TemplateDescriber().describe([statement])      # doctest: +SKIP
[['?entity2 is the currency used of the country ?entity1', 'the currency used of ?entity1']]

* :class:`TemplateDescriber`: from the Freebase schema's labels, no LLM.
* :class:`LLMDescriber`: the paper's few-shot prompts through any generator
  (:class:`memq.llm.LocalLLM`, :class:`memq.llm.OpenAIChat`), validated, with a
  recorded template fallback.
"""

from .base import Described, Describer, config_hash, describe_with_info, shared_descriptions
from .llm import LLMDescriber, LLMDescriberConfig
from .template import TemplateConfig, TemplateDescriber, parse_fragment
from .validate import clean, problem

__all__ = [
    "Described", "Describer", "LLMDescriber", "LLMDescriberConfig", "TemplateConfig", "TemplateDescriber",
    "clean", "config_hash", "describe_with_info", "shared_descriptions", "parse_fragment", "problem",
]
