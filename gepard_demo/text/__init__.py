"""The text front end: what was written -> what the model reads, with the mapping back.

    text -> lexicon -> normaliser (our rules, then the library) -> prompt (model/prompt.py)

It imports nothing else of gepard_demo: settings.py takes its modes from here, and the engine reads
every prompt's text through `front_end.shared()` (GepardEngine.prompt_ids).

Its modules, each in a line: docs/DESIGN.md's tree.
"""
