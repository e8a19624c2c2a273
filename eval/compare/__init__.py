"""Did the new run get worse anywhere? Two or more scored runs against a base, paired.

Its modules, each in a line: docs/DESIGN.md's tree.
"""
