"""The Gradio page: its layout, controls and widgets, the results' views."""
