"""The turn: assemble the context, call the model, run its tool calls under the
guardrails, and act on what they did."""
