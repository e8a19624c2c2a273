"""The speech server's operations surface: what a load balancer, a scraper and an operator see.

Its modules, each in a line: docs/DESIGN.md's tree.
"""

from gepard_demo.serving.operations.access import add_access
from gepard_demo.serving.operations.metrics import ServerMetrics
from gepard_demo.serving.operations.routes import operations_router

__all__ = ["ServerMetrics", "add_access", "operations_router"]
