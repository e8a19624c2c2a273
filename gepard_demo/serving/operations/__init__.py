"""The speech server's operations surface: what a load balancer, a scraper and an operator see.

- routes.py   `GET /health`, `/metrics`, `/version` (outside /v1: open, as vLLM's)
- metrics.py  `ServerMetrics`: the Prometheus counts, one registry per server
- access.py   vLLM's `--api-key` check (the WebSocket too) and CORS (host_settings.ServerSettings)
"""

from gepard_demo.serving.operations.access import add_access
from gepard_demo.serving.operations.metrics import ServerMetrics
from gepard_demo.serving.operations.routes import operations_router

__all__ = ["ServerMetrics", "add_access", "operations_router"]
