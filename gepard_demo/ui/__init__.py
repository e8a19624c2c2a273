"""The Gradio demo: page layout, Generate/Stop handlers, the PCM route and the browser player.

app.py builds it with `gepard_demo.ui.server.build_app(host, ...)` and serves the result.
"""
