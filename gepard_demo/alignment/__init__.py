"""When each word is spoken: the words of the requested text timed in the audio (issue 35).

One aligner for the page, our speech server and eval (eval imports it from here; gepard_demo
never imports eval). Import the modules directly; this package imports nothing heavy.

Its modules, each in a line: docs/DESIGN.md's tree.
"""
