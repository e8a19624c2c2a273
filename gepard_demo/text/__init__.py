"""The text front end: what was written -> what the model reads, with the mapping back.

    text -> lexicon -> normaliser (our rules, then the library) -> prompt (model/prompt.py)

- pieces.py     `Piece` (written tokens beside their spoken words), `rewrite`, `split`
- numbers.py    `cardinal`, `ordinal`, `digits`, `clock_minutes`
- rules.py      our layer: `RULES` (phone numbers, times, money, ordinals, ranges), `PLAIN_NUMBERS`
- library.py    `NemoNormalizer`: NeMo's grammars on windows, compiled once into a cache
- lexicon.py    `Lexicon`, `parse` (PLS or "written = spoken"), `LexiconError`
- front_end.py  `TEXT_NORMALIZATIONS`, `FrontEnd`, `Reading`, `shared`, `configure`
- command.py    `python -m gepard_demo normalize`

It imports nothing else of gepard_demo: settings.py takes its modes from here, and the engine reads
every prompt's text through `front_end.shared()` (GepardEngine.prompt_ids).
"""
