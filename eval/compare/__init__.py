"""Did the new run get worse anywhere? Two or more scored runs against a base, paired.

- paired.py  the paired statistics: bootstrap over sentences, Newcombe's paired rate interval, McNemar
- table.py   the measures (MEASURES defines each), the pairs, every delta overall and per category
- gate.py    a gate file: the worsening allowed per measure, overall and per category; the breaches
- word_diff.py  each regression's words, base and new, every error with its time
- folder.py  compare.md, compare.json, the forest and failure charts, the utterances that got worse
"""
