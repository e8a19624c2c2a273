"""The app's Eval tab (app.py hands `tab.build_eval_tab` to gepard_demo.ui.server.build_app).

Its modules, each in a line: docs/DESIGN.md's tree.
"""
