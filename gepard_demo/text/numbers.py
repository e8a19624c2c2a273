"""Numbers as English words: cardinals, ordinals, digit by digit (our own layer's verbaliser;
rules.py calls it for the classes a visitor types often)."""

from __future__ import annotations

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))
# The last word of a cardinal -> its ordinal; every other word ends in "th" (with "y" -> "ie").
_ORDINAL_WORDS = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
                  "nine": "ninth", "twelve": "twelfth"}
MAX_CARDINAL = 10**15 - 1


def _below_thousand(n: int) -> list[str]:
    words = []
    if n >= 100:
        words += [_ONES[n // 100], "hundred"]
        n %= 100
    if n >= 20:
        words.append(_TENS[n // 10])
        n %= 10
        if n:
            words.append(_ONES[n])
    elif n or not words:
        words.append(_ONES[n])
    return words


def cardinal(n: int) -> str:
    """1234 -> "one thousand two hundred thirty four" (no "and", as NeMo's English grammars)."""
    if not 0 <= n <= MAX_CARDINAL:
        raise ValueError(f"cardinal() takes 0 to {MAX_CARDINAL}, got {n}")
    if n < 1000:
        return " ".join(_below_thousand(n))
    words = []
    for scale, name in _SCALES:
        if n >= scale:
            words += _below_thousand(n // scale) + [name]
            n %= scale
    if n:
        words += _below_thousand(n)
    return " ".join(words)


def ordinal(n: int) -> str:
    """21 -> "twenty first"."""
    *head, last = cardinal(n).split()
    if last in _ORDINAL_WORDS:
        last = _ORDINAL_WORDS[last]
    else:
        last = (last[:-1] + "ie" if last.endswith("y") else last) + "th"
    return " ".join([*head, last])


def digits(text: str) -> str:
    """"0142" -> "zero one four two": each digit a word (phone numbers, codes)."""
    return " ".join(_ONES[int(d)] for d in text if d.isdigit())


def clock_minutes(minutes: int) -> str:
    """A time's minutes after the hour: 5 -> "oh five", 30 -> "thirty"; 0 is left unsaid ("")."""
    if minutes == 0:
        return ""
    return ("oh " if minutes < 10 else "") + cardinal(minutes)
