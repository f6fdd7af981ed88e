"""Rule rewordings of the template's descriptions: a plan wording that neither describer writes.

The hidden-wording robustness set (``benchmarks/describer_recall.py --wording reworded``) asks how recall holds up
when a plan says a statement in words that are not the memory's own. These rules rewrite the syntax of a template
description and keep its relation words; the class nouns before a variable are dropped, as a person would::

    ?entity2 is the official language of the country ?entity1
      -> ?entity2 is ?entity1's official language
    ?entity2 is the team of the batting statistics of the baseball player ?entity1
      -> ?entity2 is the team in ?entity1's batting statistics
    ?entity3 is the actor of the performance with film ?entity1 and character ?entity2
      -> ?entity3 is the actor where the film is ?entity1 and the character is ?entity2
    ?entity2 is the country whose currency used is ?entity1
      -> ?entity2 is the country with ?entity1 as its currency used
    ?entity2 is the director that the film ?entity1 is directed by
      -> ?entity2 is the director which ?entity1 is directed by

A description no rule matches comes back unchanged (:func:`reword` says so), so a caller can count them.
"""

from __future__ import annotations

import re

_HEAD = re.compile(r"^(\?entity\d) is (.+)$")
# "the X of the C ?e" (the last hop; C, the class noun, is dropped) and "the X of ?e"
_ONE_HOP = re.compile(r"^the (?P<x>[^?]+?) of (?:the [^?]+? )?(?P<e>\?entity\d)$")
# "the X of the Y of the C ?e"
_TWO_HOPS = re.compile(r"^the (?P<x>[^?]+?) of the (?P<y>[^?]+?) of (?:the [^?]+? )?(?P<e>\?entity\d)$")
# "the X of the C with A ?e1 and B ?e2" (a CVT with two known sides)
_WITH = re.compile(r"^the (?P<x>[^?]+?) of the [^?]+? with (?P<a>[^?]+?) (?P<e1>\?entity\d) and "
                   r"(?P<b>[^?]+?) (?P<e2>\?entity\d)$")
# "the C whose R is ?e"
_WHOSE = re.compile(r"^the (?P<c>[^?]+?) whose (?P<r>[^?]+?) is (?P<e>\?entity\d)$")
# "the C that the D ?e R..." (the reverse reading; D, the class noun, is dropped)
_THAT = re.compile(r"^the (?P<c>[^?]+?) that (?:the [^?]+? )?(?P<e>\?entity\d) (?P<r>[^?]+)$")
_EITHER = re.compile(r"^either (?P<a>.+?) or (?P<b>.+)$")


def _phrase(body: str) -> str | None:
    if m := _WITH.match(body):
        return f"the {m['x']} where the {m['a']} is {m['e1']} and the {m['b']} is {m['e2']}"
    if m := _TWO_HOPS.match(body):
        return f"the {m['x']} in {m['e']}'s {m['y']}"
    if m := _THAT.match(body):
        return f"the {m['c']} which {m['e']} {m['r']}"
    if m := _WHOSE.match(body):
        return f"the {m['c']} with {m['e']} as its {m['r']}"
    if m := _ONE_HOP.match(body):
        return f"{m['e']}'s {m['x']}"
    return None


def reword(description: str) -> tuple[str, bool]:
    """``(reworded description, changed)``; ``changed`` False when no rule matched (the description itself)."""
    m = _HEAD.match(description.strip())
    if not m:
        return description, False
    target, body = m.groups()
    if e := _EITHER.match(body):
        a, b = _phrase(e["a"]), _phrase(e["b"])
        phrase = f"{a or e['a']} or {b or e['b']}" if (a or b) else None
    else:
        phrase = _phrase(body)
    if phrase is None or phrase == body:
        return description, False
    return f"{target} is {phrase}", True
