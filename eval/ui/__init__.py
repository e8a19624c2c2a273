"""The app's Eval tab (app.py hands `tab.build_eval_tab` to gepard_demo.ui.server.build_app).

- tab.py                `build_eval_tab`: run, score and report a set; play any row; reopen runs
- settings_form.py      the run and sweep forms' settings: the Speak tab's declared controls, less the seed
- runs_view.py          what the tab reads back from run folders (runs, reports, rows, audio)
- word_view.py          a row's words coloured by error, each a click away from its moment
- compare_section.py    a base against one or more runs: table, forest plot, gate, regressions side by side
- listening_section.py  the blind A / B / same listening test
- sweep_section.py      the tab's sweep section
- load_section.py       a speech server at a few concurrencies, as `python -m eval load`
- demo_link.py          "Open in the demo": a row's text, settings, voice and seed into the Speak tab
- common.py             the app's engine as an eval engine (holding the app's lock), chart images
"""
