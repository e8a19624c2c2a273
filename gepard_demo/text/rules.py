"""Our own layer of the normaliser: the classes a visitor types often, read the way a listener
expects, where the libraries fall short (both read "555-0142" as a number, and disagree on
"$5.50"). Each rule rewrites the spoken side of the pieces (pieces.py), so the written tokens
stay mapped to the words they became.

`RULES` run before a library normaliser (the "nemo" mode: what they leave, it reads);
`PLAIN_NUMBERS` finish the "rules" mode, which has no library: the remaining numbers and symbols.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .numbers import MAX_CARDINAL, cardinal, clock_minutes, digits, ordinal
from .pieces import Piece, rewrite

# symbol -> (one, many, one hundredth, hundredths)
_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
               "£": ("pound", "pounds", "penny", "pence")}
_AMOUNT = r"\d{1,3}(?:,\d{3})+|\d+"


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _counted(n: int, one: str, many: str) -> str:
    return f"{cardinal(n)} {one if n == 1 else many}"


def _money(m: re.Match[str]) -> str:
    one, many, cent, cents = _CURRENCIES[m["cur"]]
    whole, frac = _number(m["whole"]), int(m["cents"] or 0)
    if not frac:
        return _counted(whole, one, many)
    if not whole:
        return _counted(frac, cent, cents)
    return f"{_counted(whole, one, many)} {_counted(frac, cent, cents)}"


def _phone(m: re.Match[str]) -> str:
    """Digit by digit, a pause (a comma) between the groups as they were written."""
    groups = re.findall(r"\d+", m[0])
    return ", ".join(digits(g) for g in groups)


def _sentence_end(m: re.Match[str]) -> str:
    """A full stop the match swallowed (the "." of "a.m.") that also ended the sentence, kept."""
    after = m.string[m.end():]
    return "." if m[0].endswith(".") and (not after.strip() or re.match(r"\s+[A-Z]", after)) else ""


def _time(m: re.Match[str]) -> str:
    hour, minutes = int(m["h"]), int(m["m"] or 0)
    words = " ".join(w for w in (cardinal(hour), clock_minutes(minutes)) if w)
    return f"{words} {m['ap'].lower()} m{_sentence_end(m)}"


def _clock(m: re.Match[str]) -> str:
    """A 24-hour clock: 9:30 -> "nine thirty", 9:00 -> "nine o'clock", 14:00 -> "fourteen hundred"."""
    hour, minutes = int(m["h"]), int(m["m"])
    if minutes:
        return f"{cardinal(hour)} {clock_minutes(minutes)}"
    return cardinal(hour) + (" o'clock" if hour <= 12 else " hundred")


def _ordinal(m: re.Match[str]) -> str:
    return ordinal(_number(m["n"]))


def _range(m: re.Match[str]) -> str:
    return f"{m['a']} to {m['b']}"


Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]

# In this order: money and phone numbers before the hyphen becomes "to", times before the bare clock.
RULES: tuple[Rule, ...] = (
    (re.compile(rf"(?P<cur>[$€£])(?P<whole>{_AMOUNT})(?:\.(?P<cents>\d\d))?(?![\d.,]*\d)"), _money),
    (re.compile(r"(?<![\w-])(?:\+?1[-. ])?(?:\(\d{3}\) ?|\d{3}[-. ])?\d{3}[-.]\d{4}(?![\w-])"), _phone),
    (re.compile(r"\b(?P<h>1[0-2]|0?[1-9])(?::(?P<m>[0-5]\d))? ?(?P<ap>[aApP])\.? ?[mM]\b\.?"), _time),
    (re.compile(r"\b(?P<n>\d{1,3}(?:,\d{3})+|\d+)(?:st|nd|rd|th)\b"), _ordinal),
    (re.compile(r"(?<![\w.,:/-])(?P<a>\d+(?:\.\d+)?) ?[-–] ?(?P<b>\d+(?:\.\d+)?)(?![\w.,:/=+*-]*\d)"), _range),
)


def _year(n: int) -> str:
    """A four-digit year read as a year: 1984 -> "nineteen eighty four", 2005 -> "two thousand five"."""
    century, rest = divmod(n, 100)
    if 2000 <= n <= 2009 or rest == 0 and n % 1000 == 0:
        return cardinal(n)
    return f"{cardinal(century)} {'hundred' if rest == 0 else clock_minutes(rest)}"


def _plain_number(m: re.Match[str]) -> str:
    whole = _number(m["whole"])
    if whole > MAX_CARDINAL:
        return digits(m["whole"])
    if m["frac"] is None and m["whole"].isdigit() and len(m["whole"]) == 4 and 1100 <= whole <= 2099:
        words = _year(whole)
    else:
        words = cardinal(whole)
    if m["frac"] is not None:
        words += " point " + digits(m["frac"])
    return words + {"%": " percent", "°": " degrees", None: ""}[m["unit"]]


_SYMBOLS = {"&": "and", "@": "at", "+": "plus", "=": "equals", "/": "slash", "#": "number", "%": "percent", "°": "degrees"}

PLAIN_NUMBERS: tuple[Rule, ...] = (
    (re.compile(r"(?<![\d:])(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?![\d:])"), _clock),
    (re.compile(r"(?<!\d)(?P<whole>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<frac>\d+))?(?P<unit>%|°)?"), _plain_number),
    (re.compile("[" + re.escape("".join(_SYMBOLS)) + "]"), lambda m: f" {_SYMBOLS[m[0]]} "),
)


def apply(pieces: Sequence[Piece], rules: Sequence[Rule] = RULES) -> list[Piece]:
    out = list(pieces)
    for pattern, replace in rules:
        out = rewrite(out, pattern, replace)
    return out
