"""The demo page: the Gradio page (page/), a Generate's job (jobs/), what makes its audio (hosts/),
the browser's scripts (static/), the PCM and words routes, takes and captions.

app.py builds it with `gepard_demo.ui.server.build_app(host, ...)` and serves the result.
"""
