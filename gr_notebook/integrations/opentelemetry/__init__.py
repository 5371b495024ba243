"""Traces of runs for OpenTelemetry (the optional extra ``gr-notebook[otel]``).

    handle = instrument(agent)            # every run the agent starts is traced
    run = agent.run_sync("Fix the failing test")
    handle.uninstrument()
    export_run(run, provider)             # a recorded run, the same spans

Spans (GenAI semantic conventions, names as ``opentelemetry-semantic-conventions`` spells
them):

- ``invoke_agent {agent name}`` (INTERNAL), one per run: ``gen_ai.operation.name``,
  ``gen_ai.provider.name``, ``gen_ai.agent.name``, ``gen_ai.request.model``,
  ``gen_ai.conversation.id`` (the run id), ``gen_ai.usage.input_tokens`` and
  ``gen_ai.usage.output_tokens`` (the run's), and ``gr.harness``, ``gr.run.status``,
  ``gr.run.reason``, ``gr.run.turns``, ``gr.limit.kind``/``used``/``limit`` (the limit that
  ended it), ``gr.run.parent_id`` and ``gr.run.relation`` (a resume or a fork);
- ``chat {model}`` (CLIENT), one per model call, a child of the run's:
  ``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens``,
  ``gen_ai.usage.cache_creation.input_tokens``, ``gen_ai.response.finish_reasons``,
  ``gr.turn``, ``gr.cost_usd``;
- ``execute_tool {tool}`` (INTERNAL), one per tool call, a child of the run's:
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type`` (``function``),
  ``gr.turn``. It runs from the policies' decision to the last thing the call triggered.

A span that failed has status ERROR and ``error.type``: for a tool call ``denied`` (a policy
or a person refused it), ``stop_refused`` (the completion checker refused the end of the
job), the exception's class when the tool raised, else ``tool_error``; for a run that
failed, the class of the error that ended it.

Every guardrail decision is a span event, on its tool call's span or else the run's, with
``gr.decision`` and ``gr.reason`` where it has them and ``gr.mode`` (``live`` or ``shadow``):

- ``gr.policy_decision``: ``gr.decision`` allow/deny/ask, ``gr.policy.name`` (the policy
  that decided), ``gr.reason``, ``gr.policies`` (those asked);
- ``gr.approval_requested``: ``gr.approval.request_id``, ``gr.approval.asked``,
  ``gr.reason``, ``gr.policies``; ``gr.approval_answered``: ``gr.decision``
  approve/deny/edit, ``gr.approval.by``, ``gr.approval.waited_s``, ``gr.reason``;
- ``gr.feedback``: ``gr.feedback.provider``, ``gr.feedback.severity``, ``gr.reason`` (its
  summary);
- ``gr.completion_check``: ``gr.decision`` complete/refused/bypassed, ``gr.reason`` (the
  checker's feedback), ``gr.completion.checker``, ``gr.completion.stop``,
  ``gr.completion.refusals``, ``gr.completion.bypassed``, ``gr.completion.give_up``;
- ``gr.intervention_check``: ``gr.decision`` intervene/skip, ``gr.reason``,
  ``gr.intervention.fired``, ``gr.intervention.tier``, ``gr.intervention.action``,
  ``gr.intervention.skip_reason``, ``gr.intervention.step``;
- ``gr.order`` (an order to the model: a refusal, a wrap-up, a strategy check):
  ``gr.order.source``, ``gr.order.action``, ``gr.order.from_limits``;
- ``gr.request_over_budget``: ``gr.budget.needed_tokens``, ``gr.budget.remaining_tokens``,
  ``gr.limit.kind``, ``gr.limit.limit``;
- ``gr.model_retry`` (on the model call's span): ``gr.retry.attempt``, ``gr.error.type``,
  ``gr.retry.status``, ``gr.retry.delay_s``;
- ``gr.error``: ``gr.error.source``, ``gr.error.type``, ``gr.error.message``.

Content, exported only with ``capture_content=True``: the instructions
(``gen_ai.input.messages`` on the run's span), each reply (``gen_ai.output.messages``),
tool input and output (``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``), a
feedback block's text (``gr.feedback.text``), an order's text (``gr.order.text``) and the
input a person was asked to approve or edited (``gr.approval.input``). Names, ids, counts,
verdicts and reasons are not content. No API key is in any event, so none is exported.
"""

from __future__ import annotations

from gr_notebook.integrations.opentelemetry.tracing import (
    EXTRA,
    Instrumentation,
    export_run,
    instrument,
    load_otel,
)

__all__ = ["EXTRA", "Instrumentation", "export_run", "instrument", "load_otel"]
