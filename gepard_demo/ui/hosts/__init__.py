"""What makes the page's audio: a model here, ZeroGPU, or a speech server."""
