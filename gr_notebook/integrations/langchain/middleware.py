"""``GuardrailMiddleware``: an agent's guardrails as LangChain v1 middleware (this module
imports ``langchain``; :func:`~gr_notebook.integrations.langchain.guardrail_middleware`
loads it only once the extra is known to be installed).

The hooks, at LangChain's fixed points:

- ``before_agent``: the run starts;
- ``before_model``: a person's stop, a decided end or a spent limit ends the session
  (``jump_to: "end"``); past 80% of a hard limit, the wrap-up order;
- ``wrap_model_call``: one model call, a turn, its tokens (``usage_metadata``) and cost;
- ``after_model``: a reply without tool calls is a stop the completion checker judges; a
  refusal sends the model back (``jump_to: "model"``) with the checker's feedback;
- ``wrap_tool_call``: the policies before the call, the rest of gr's tool step after it;
- ``after_agent``: the run ends, with the status gr's loop would give it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    hook_config,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import ToolCall
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from gr_notebook.blocking import run_blocking
from gr_notebook.engine.guarded_step import Allowed, GuardedCall, Held, Refused
from gr_notebook.engine.outcome import LoopOutcome
from gr_notebook.errors import ConfigError
from gr_notebook.events import ErrorEvent
from gr_notebook.guardrails.approval import Approvals, edited_note
from gr_notebook.integrations.langchain.calls import Sequencer, ToolStep, schema_of
from gr_notebook.integrations.langchain.session import ModelCall, Session
from gr_notebook.integrations.langchain.usage import usage_of
from gr_notebook.run import Run
from gr_notebook.tools.base import ToolOutput

__all__ = ["GuardrailMiddleware"]

Update = dict[str, Any] | None


class GuardrailMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """An agent's guardrails for one LangChain agent session: pass it to
    ``create_agent(..., middleware=[mw])``; ``mw.run`` records the session."""

    def __init__(self, session: Session, tools: Sequence[BaseTool]) -> None:
        super().__init__()
        self._session = session
        self.tools = list(tools)
        self._step = ToolStep(session)
        self._order = Sequencer()

    @property
    def name(self) -> str:
        return "GuardrailMiddleware"

    @property
    def run(self) -> Run:
        return self._session.run

    # -- the run's life ------------------------------------------------------------------------

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> Update:
        with self._session.lock:
            self._session.begin(_first_human(state.get("messages", ())))
        return None

    async def abefore_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> Update:
        return self.before_agent(state, runtime)

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> Update:
        session = self._session
        with session.lock:
            outcome = session.pending_end() or LoopOutcome(
                "ended", "the LangChain agent ended the session"
            )
            session.finish(outcome)
        return None

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> Update:
        return self.after_agent(state, runtime)

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> Update:
        session = self._session
        with session.lock:
            if session.pending_end() is not None:
                return {"jump_to": "end"}
            order = self._wrap_up()
        if order is None:
            return None
        return {"messages": [HumanMessage(order)]}

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> Update:
        return self.before_model(state, runtime)

    def _wrap_up(self) -> str | None:
        """Past 80% of a hard limit, once: the order to finish now (gr's loop writes it on
        its todo layer; a LangChain agent reads it as a message)."""
        return self._session.step.wrap_up()

    # -- model calls ---------------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage:
        self._before_call(request)
        started = time.perf_counter()
        with self._calling(request):
            response = handler(request)
        self._after_call(request, response, started)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        self._before_call(request)
        started = time.perf_counter()
        with self._calling(request):
            response = await handler(request)
        self._after_call(request, response, started)
        return response

    @contextmanager
    def _calling(self, request: ModelRequest[Any]) -> Iterator[None]:
        """The model call: a model that cannot call tools, or one that fails, ends the run."""
        try:
            yield
        except NotImplementedError as exc:
            raise self._cannot_call_tools(request, exc) from exc
        except GraphBubbleUp:
            raise
        except Exception as exc:
            self._model_failed(exc)
            raise

    def _before_call(self, request: ModelRequest[Any]) -> None:
        session = self._session
        with session.lock:
            try:
                session.bind_tools([_tool_name(t) for t in request.tools])
            except ConfigError as exc:
                session.finish(LoopOutcome("failed", str(exc), exc))
                raise
            session.state.turn += 1

    def _after_call(
        self, request: ModelRequest[Any], response: ModelResponse[Any], started: float
    ) -> None:
        reply = next((m for m in response.result if isinstance(m, AIMessage)), None)
        if reply is None:
            return
        meta = reply.response_metadata or {}
        model = str(meta.get("model_name") or meta.get("model") or self._session.model)
        call = ModelCall(
            usage_of(reply, request.messages),
            text=reply.text,
            tool_calls=len(reply.tool_calls),
            model=model,
            stop_reason=str(meta.get("stop_reason") or meta.get("finish_reason") or "")
            or ("tool_use" if reply.tool_calls else "end_turn"),
            duration_s=time.perf_counter() - started,
        )
        with self._session.lock:
            self._session.call_made(call)
        self._order.turn([str(c.get("id") or "") for c in reply.tool_calls])

    def _model_failed(self, exc: Exception) -> None:
        """The model (or a middleware inside this one) raised: LangChain ends the session
        with the exception and runs no ``after_agent``, so the run ends ``failed`` here."""
        session = self._session
        with session.lock:
            session.state.emit(
                ErrorEvent(source="model", error_type=type(exc).__name__, message=str(exc))
            )
            session.finish(
                LoopOutcome("failed", f"the model failed: {type(exc).__name__}: {exc}", exc)
            )

    def _cannot_call_tools(self, request: ModelRequest[Any], exc: NotImplementedError) -> Exception:
        model = request.model
        if type(model).bind_tools is not _base_bind_tools():
            return exc
        error = ConfigError(
            f"the LangChain model {type(model).__name__} cannot call tools (its bind_tools "
            "is not implemented), and the guardrails judge tool calls: use a chat model that "
            "supports tool calling, such as ChatAnthropic or ChatOpenAI "
            "(langchain.chat_models.init_chat_model('anthropic:claude-sonnet-4-6'))"
        )
        with self._session.lock:
            self._session.finish(LoopOutcome("failed", str(error), error))
        return error

    # -- stops ---------------------------------------------------------------------------------

    @hook_config(can_jump_to=["model", "end"])
    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> Update:
        messages = state.get("messages") or []
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage) or last.tool_calls:
            return None
        session = self._session
        with session.lock:
            if session.judged:
                return {"jump_to": "end"}  # ended already: nothing to judge
            judged = self._session.step.judge_end(last.text)
            if isinstance(judged, LoopOutcome):
                session.end_with(judged)
                return None
            self._session.step.told(judged)
        return {"messages": [HumanMessage(judged)], "jump_to": "model"}

    @hook_config(can_jump_to=["model", "end"])
    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> Update:
        return self.after_model(state, runtime)

    # -- tool calls ----------------------------------------------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        call = self._call_of(request)
        self._order.enter(call.tool_use_id)
        try:
            started = time.perf_counter()
            with self._session.lock:
                verdict = self._step.check(call)
            if isinstance(verdict, Held):  # a blocked invoke() has no loop for a desk
                verdict = run_blocking(self._resolve(verdict, request, desk=False))
            if isinstance(verdict, Refused):
                return self._answer(call, verdict.output, started)
            request = self._as_run(request, verdict)
            with self._session.lock:
                self._step.intent(verdict)
            try:
                result = handler(request)
            except GraphBubbleUp:
                raise
            except Exception as exc:
                return self._failed(verdict.call, exc, started)
            return self._finish_call(verdict, result, started)
        finally:
            self._order.leave(call.tool_use_id)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        call = self._call_of(request)
        await self._order.aenter(call.tool_use_id)
        try:
            started = time.perf_counter()
            with self._session.lock:
                verdict = self._step.check(call)
            if isinstance(verdict, Held):
                verdict = await self._resolve(verdict, request, desk=True)
            if isinstance(verdict, Refused):
                return self._answer(call, verdict.output, started)
            request = self._as_run(request, verdict)
            with self._session.lock:
                self._step.intent(verdict)
            try:
                result = await handler(request)
            except GraphBubbleUp:
                raise
            except Exception as exc:
                return self._failed(verdict.call, exc, started)
            return self._finish_call(verdict, result, started)
        finally:
            self._order.leave(call.tool_use_id)

    def _call_of(self, request: ToolCallRequest) -> GuardedCall:
        call = request.tool_call
        args = call.get("args")
        params = dict(args) if isinstance(args, Mapping) else {}
        return self._step.call(str(call.get("name") or ""), params, str(call.get("id") or ""))

    async def _resolve(
        self, held: Held, request: ToolCallRequest, *, desk: bool
    ) -> Allowed | Refused:
        """A policy's ask, answered as gr's loop answers it: the dashboard's desk (under
        ``ainvoke``), the agent's ``confirm=``, or nobody (a denial that says so)."""
        state = self._session.state
        approvals = state.approvals
        if not desk:
            approvals = Approvals(
                emit=state.emit,
                confirm=approvals.confirm,
                run_id=state.run_id,
                time_left=state.time_left,
                clock=state.clock,
            )
        return await self._session.step.resolve(
            held, schema=schema_of(request.tool), approvals=approvals
        )

    @staticmethod
    def _as_run(request: ToolCallRequest, allowed: Allowed) -> ToolCallRequest:
        """The request with the input that runs: as a person edited it, when they did."""
        if not allowed.edited:
            return request
        edited = ToolCall(
            name=request.tool_call["name"],
            args=dict(allowed.call.params),
            id=request.tool_call.get("id"),
        )
        return request.override(tool_call=edited)

    def _failed(self, call: GuardedCall, exc: Exception, started: float) -> ToolMessage:
        """A tool that raised: an error result the model can act on, as in gr's loop."""
        output = self._session.step.failed(call.host_name, exc)
        return self._answer(call, output, started, ran=True)

    def _finish_call(
        self, allowed: Allowed, result: ToolMessage | Command[Any], started: float
    ) -> ToolMessage | Command[Any]:
        call = allowed.call
        note = edited_note(call.params) if allowed.edited else ""
        if not isinstance(result, ToolMessage):  # a Command: recorded, passed on as it is
            with self._session.lock:
                output = ToolOutput("(the tool returned a LangGraph Command)")
                self._step.after(call, output, ran=True, started=started)
            return result
        output = ToolOutput(note + result.text, result.status == "error")
        with self._session.lock:
            extra = self._step.after(call, output, ran=True, started=started)
        if not (extra or note):
            return result
        content = result.content
        if note:
            content = note + content if isinstance(content, str) else [note, *content]
        if extra:
            content = _with(content, extra)
        return result.model_copy(update={"content": content})

    def _answer(
        self, call: GuardedCall, output: ToolOutput, started: float, *, ran: bool = False
    ) -> ToolMessage:
        """A call that did not run (or failed): its result, with what follows it."""
        with self._session.lock:
            extra = self._step.after(call, output, ran=ran, started=started)
        content = output.content if not extra else f"{output.content}\n\n{extra}"
        return ToolMessage(
            content=content, tool_call_id=call.tool_use_id, name=call.host_name, status="error"
        )

    def __repr__(self) -> str:
        return f"<GuardrailMiddleware for {self.run.run_id}: {self.run.status}>"


def _tool_name(tool: BaseTool | Mapping[str, Any]) -> str:
    if isinstance(tool, BaseTool):
        return tool.name
    name = tool.get("name") or (tool.get("function") or {}).get("name")
    return str(name or tool.get("type") or "")


def _first_human(messages: Sequence[BaseMessage]) -> str:
    for message in messages:
        if isinstance(message, HumanMessage):
            return message.text
    return ""


def _with(content: str | list[Any], extra: str) -> str | list[Any]:
    if isinstance(content, str):
        return f"{content}\n\n{extra}"
    return [*content, {"type": "text", "text": extra}]


def _base_bind_tools() -> Any:
    from langchain_core.language_models.chat_models import BaseChatModel

    return BaseChatModel.bind_tools
