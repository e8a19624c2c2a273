"""The app's Eval tab (app.py hands `tab.build_eval_tab` to gepard_demo.ui.server.build_app).

- tab.py            `build_eval_tab`: run, score and report a set; reopen and compare runs
- sweep_section.py  the tab's sweep section
- common.py         the app's engine as an eval engine (holding the app's lock), chart images
"""
