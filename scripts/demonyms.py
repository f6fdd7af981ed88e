"""Writes data/demonyms/demonyms.tsv: each country's English name and its demonyms, from the countryinfo package.

    pip install countryinfo==1.0.1 && .venv/bin/python scripts/demonyms.py

One line a country that has a demonym (``name<TAB>demonym[,demonym...]``), sorted by name. countryinfo writes two
demonyms of one country apart with "," or "/" ("Antiguan,Barbudan"), and a demonym equal to the country's own name
("Djibouti") names nothing new, so it is left out. The linker reads the file (:mod:`memq.link.demonyms`); this
script is only needed to write it again.
"""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "data" / "demonyms" / "demonyms.tsv"


def rows() -> list[tuple[str, list[str]]]:
    from countryinfo import all_countries

    out: dict[str, list[str]] = {}
    for country in all_countries():
        name, demonym = (country.name() or "").strip(), (country.demonym() or "").strip()
        forms = [d.strip() for d in re.split(r"[,/]", demonym) if d.strip() and d.strip() != name]
        if name and forms:
            out.setdefault(name, [])
            out[name] += [d for d in forms if d not in out[name]]
    return sorted(out.items())


def main() -> None:
    table = rows()
    OUT.write_text("".join(f"{name}\t{','.join(forms)}\n" for name, forms in table), encoding="utf-8")
    print(f"{len(table)} countries written to {OUT.relative_to(OUT.parent.parent.parent)} "
          f"(countryinfo {version('countryinfo')})")


if __name__ == "__main__":
    main()
