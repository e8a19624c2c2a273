"""A Generate's life on the page: claimed, queued, run in its thread, its PCM kept."""
