"""What watches a row as it decodes: the penalty, the guardrails, the probe, how a run ended."""
