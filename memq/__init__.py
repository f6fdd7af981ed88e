"""memq: question answering over knowledge graphs by memory-augmented query reconstruction."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__version__ = "0.1.0"


def answer(question, entities=None, *, config=None, plan=None):
    """Answer ``question`` about ``entities`` (linked from the question when left out); see :func:`memq.api.answer`."""
    from .api import answer as _answer

    return _answer(question, entities, config=config, plan=plan)


# Modules that moved in 0.1.0 -> where they live now. The old path still imports, for one release, as the
# very same module object (so a monkeypatch through either name patches both), with a DeprecationWarning.
MOVED_MODULES = {
    **{f"memq.{name}": f"memq.llm.{name}" for name in (
        "llamacpp", "draft", "kv_state", "gguf_weights", "lora_gguf", "chat_tokenizer")},
    **{f"memq.{name}": f"memq.reconstruct.{name}" for name in ("ground", "assemble", "repair")},
    "memq.hashing": "memq.files",
}


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old module path of :data:`MOVED_MODULES` to the module at its new path."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = MOVED_MODULES[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import it from there (the old path goes in the next release)",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__  # the import system stamps the alias's spec on the module ...
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state  # ... and this puts the module's own back


if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, MovedModuleFinder())  # before the path finders: a stale file of the old name loses

__all__ = ["__version__", "answer"]
