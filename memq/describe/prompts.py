"""The few-shot description prompts of the MemQ paper (Appendix B, Tables 6-8).

Copied from the paper with its wording (typos included) and only the layout
repaired (the paper's PDF extraction glued ``### EXAMPLE2 Sparql:`` onto one
line). ``{sparql}`` is replaced by the statement's SPARQL fragment with
:func:`render` (plain replacement: the examples themselves contain braces).

The paper has no prompt for "filter" and "order" statements; those are
described by the template describer (see :class:`memq.describe.llm.LLMDescriber`).
"""

from __future__ import annotations

_HEAD = """Act as a SPARQL expert.
I need you to explain the meaning and function of a specific part of a SPARQL query.
You job is answer the Question for me. ONLY OUTPUT THE ANSWER, NOTING ELSE!!
"""

_Q2 = """Question: How does ?entity2 related to ?entity1 ?
Please answer the question with "?entity2 is [noun phrase]" ."""

_Q3 = """Question: How does ?entity3 related to ?entity1 and ?entity2 ?
Please answer the question with "?entity3 is [noun phrase]" ."""

STRUCTURE_1 = _HEAD + f"""### EXAMPLE1
Sparql:
?entity1 ns:location.country.currency_used ?entity2 .
{_Q2}
Answer: ?entity2 is the currency used in the country ?entity1.
### EXAMPLE2
Sparql:
?entity2 ns:location.country.currency_used ?entity1 .
{_Q2}
Answer: ?entity2 is the country that use ?entity1 as currency.
### EXAMPLE3
Sparql:
?entity2 ns:government.election_campaign.candidate ?entity1 .
{_Q2}
Answer: ?entity2 is the election campaign which ?entity1 is the candidate.
### EXAMPLE4
Sparql:
?entity1 ns:government.election_campaign.candidate ?entity2 .
{_Q2}
Answer: ?entity2 is the candidate in the election campaign ?entity1.
### EXAMPLE5
Sparql:
{{ ?entity2 ns:sports.sports_championship_event.runner_up ?entity1 }} UNION
{{ ?entity2 ns:sports.sports_championship_event.champion ?entity1 }}
{_Q2}
Answer: ?entity2 is either the runner-up or the champion of a sports championship event ?entity1.
### EXAMPLE6
Sparql:
{{ ?entity1 ns:location.statistical_region.places_exported_to ?tmp0 .
?tmp0 ns:location.imports_and_exports.exported_to ?entity2 }} UNION
{{ ?entity1 ns:location.statistical_region.places_exported_from ?tmp1 .
?tmp1 ns:location.imports_and_exports.exported_from ?entity2 }}
{_Q2}
Answer: ?entity2 is the place that is either exported to or exported from the statistical region ?entity1.
### YOUR TURN
Sparql:
{{sparql}}
{_Q2}
Answer:"""

STRUCTURE_2 = _HEAD + f"""### EXAMPLE1
Sparql:
?cvt ns:government.government_position_held.office_holder ?entity1 .
?entity2 ns:government.governmental_body.members ?cvt .
{_Q2}
Answer: ?entity2 is the governmental body that is held by ?entity1.
Answer: ?entity2 is the governmental body that has an office holder ?entity1.
### EXAMPLE2
Sparql:
?entity1 ns:film.actor.film ?cvt .
?cvt ns:film.performance.character ?entity2 .
{_Q2}
Answer: ?entity2 is the character played by the actor ?entity1.
### EXAMPLE3
Sparql:
?cvt ns:music.group_membership.member ?entity1 .
?entity2 ns:music.musical_group.member ?cvt .
{_Q2}
Answer: ?entity2 is the musical group that has the member ?entity1.
Answer: ?entity2 is the group that includes the member ?entity1.
### YOUR TURN
Sparql:
{{sparql}}
{_Q2}
Answer:"""

STRUCTURE_3 = _HEAD.replace("answer the Question", "complete the answer") + f"""### EXAMPLE1
Sparql:
?cvt ns:sports.sports_team_coach_tenure.position ?entity1 .
?cvt ns:sports.sports_team_coach_tenure.coach ?entity2 .
?entity3 ns:sports.sports_team.coaches ?cvt .
{_Q3}
Answer: ?entity3 is the sports team that has a coach ?entity2 who holds the position ?entity1 .
### EXAMLPE2
Sparql:
?entity1 ns:film.actor.film ?cvt .
?cvt ns:film.performance.character ?entity2 .
?cvt ns:film.performance.film ?entity3 .
{_Q3}
Answer: ?entity3 is the film in which the actor ?entity1 performs the character ?entity2.
Answer: ?entity3 is the film in which ?entity1 acted as a character ?entity2.
### EXAMLPE3
Sparql:
?entity1 ns:sports.pro_athlete.teams ?cvt .
?cvt ns:sports.sports_team_roster.team ?entity2 .
?cvt ns:sports.sports_team_roster.from ?entity3
{_Q3}
Answer: ?entity3 is the starting date when ?entity1 (the professional athlete) was part of the team ?entity2.
Answer: ?entity3 is the start date of the period during which ?entity1 was part of the team ?entity2.
### YOUR TURN
Sparql:
{{sparql}}
{_Q3}
Answer:"""

PROMPTS = {"1": STRUCTURE_1, "2": STRUCTURE_2, "3": STRUCTURE_3}

#: Inserted before the final ``Answer:`` on the one retry after an invalid answer.
RETRY_HINT = {
    "1": '\nReply with ONE sentence that starts with "?entity2 is" and mentions ?entity1.',
    "2": '\nReply with ONE sentence that starts with "?entity2 is" and mentions ?entity1.',
    "3": '\nReply with ONE sentence that starts with "?entity3 is" and mentions ?entity1 and ?entity2.',
}


def render(structure: str, sparql: str, retry: bool = False) -> str:
    """The prompt for one statement (with the retry hint when ``retry``)."""
    if structure not in PROMPTS:
        raise ValueError(f"no description prompt for structure {structure!r}; expected 1, 2 or 3")
    text = PROMPTS[structure].replace("{sparql}", sparql.strip())
    if retry:
        text = text[: -len("Answer:")] + RETRY_HINT[structure].strip() + "\nAnswer:"
    return text
