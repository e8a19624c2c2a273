"""Where a model comes from: a directory, a Hugging Face id, the tiny one, the full-size shape."""
