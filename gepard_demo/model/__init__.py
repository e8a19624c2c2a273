"""The talker and what it needs: text ids in, 32-code frames and p_stop out (facts §1-3).

Its modules, each in a line: docs/DESIGN.md's tree.
"""
