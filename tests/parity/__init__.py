"""The parity matrix: the same guardrail, the same verdict, on every runtime."""
