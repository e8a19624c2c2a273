"""The Gradio demo: page layout, Generate/Stop handlers, the PCM route and the browser player.

Captions (each segment's words under the player): captions.py, words_route.py, captions.js.

app.py builds it with `gepard_demo.ui.server.build_app(host, ...)` and serves the result.
"""
