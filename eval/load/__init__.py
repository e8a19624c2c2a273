"""Load a speech server as `vllm bench serve --omni --backend openai-audio-speech` does, with a gate.

- metrics.py  every figure under vLLM's name, computed as the wheel computes it; one request's row
- client.py   one streamed request as the bench sends it; the check before a run (server, body, rate)
- runner.py   a point (closed loop or Poisson), a sweep of points, warm-ups, a pool of servers
- gate.py     bounds per point (YAML) and their breaches
- report.py   the folder: rows, per-point summaries in the bench's layout, report.md, the knee chart
- folder.py   one run from its points to its folder, kept when interrupted (`python -m eval load`)
"""
