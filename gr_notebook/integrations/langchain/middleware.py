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
from collections.abc import Awaitable, Callable, Mapping, Sequence
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
from gr_notebook.engine.outcome import LoopOutcome, gave_up, turn_ended
from gr_notebook.errors import ConfigError
from gr_notebook.events import ErrorEvent
from gr_notebook.guardrails.approval import Approvals, Resolution
from gr_notebook.guardrails.resources import ResourceReport
from gr_notebook.guardrails.runtime import Denial
from gr_notebook.guidance import Directive
from gr_notebook.integrations.langchain import prompts
from gr_notebook.integrations.langchain.calls import Sequencer, ToolStep, inject
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
        """Past 80% of a hard limit (or with one turn left), once: the order to finish now,
        as gr's loop gives it when the agent regulates itself."""
        session = self._session
        if session.agent.regulation is None or session.view.wrap_up is not None:
            return None
        report = ResourceReport.of(session.state.usage(), None)
        if not report.wrap_up:
            return None
        text = prompts.wrap_up(report.recommendation)
        session.view.order_wrap_up(report.recommendation)
        inject(session, Directive(text, "limits", "wrap_up", from_limits=True))
        return text

    # -- model calls ---------------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage:
        self._before_call(request)
        started = time.perf_counter()
        try:
            response = handler(request)
        except NotImplementedError as exc:
            raise self._cannot_call_tools(request, exc) from exc
        except GraphBubbleUp:
            raise
        except Exception as exc:
            self._model_failed(exc)
            raise
        self._after_call(request, response, started)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        self._before_call(request)
        started = time.perf_counter()
        try:
            response = await handler(request)
        except NotImplementedError as exc:
            raise self._cannot_call_tools(request, exc) from exc
        except GraphBubbleUp:
            raise
        except Exception as exc:
            self._model_failed(exc)
            raise
        self._after_call(request, response, started)
        return response

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
            self._session.model_call(call)
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
            if session.run.done or session.outcome is not None or session.loop.stop_reason:
                return {"jump_to": "end"}  # ended already: nothing to judge
            guards, shadow = session.state.guards, session.state.shadow
            final = last.text
            verdict = guards.judge_stop("end_turn", final)
            if shadow is not None:
                shadow.judge_stop("end_turn", final)
            if verdict.allowed:
                session.end_with(turn_ended(session.state, verdict, final))
                return None
            if verdict.give_up:
                session.end_with(gave_up(session.state, verdict))
                return None
            text = guards.refusal(verdict)
            inject(session, text)
        return {"messages": [HumanMessage(text)], "jump_to": "model"}

    @hook_config(can_jump_to=["model", "end"])
    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> Update:
        return self.after_model(state, runtime)

    # -- tool calls ----------------------------------------------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        name, params, call_id = _call_of(request)
        self._order.enter(call_id)
        try:
            started = time.perf_counter()
            with self._session.lock:
                refused, ask = self._step.check(name, params, call_id)
            if ask is not None:
                resolution = run_blocking(self._decide(ask, name, params, call_id, sync=True))
                refused, request, params = self._resolved(ask, resolution, request, params)
            if refused is not None:
                return self._answer(request, name, params, call_id, refused, started)
            return self._execute(request, handler, name, params, call_id, started)
        finally:
            self._order.leave(call_id)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        name, params, call_id = _call_of(request)
        await self._order.aenter(call_id)
        try:
            started = time.perf_counter()
            with self._session.lock:
                refused, ask = self._step.check(name, params, call_id)
            if ask is not None:
                resolution = await self._decide(ask, name, params, call_id, sync=False)
                refused, request, params = self._resolved(ask, resolution, request, params)
            if refused is not None:
                return self._answer(request, name, params, call_id, refused, started)
            try:
                result = await handler(request)
            except GraphBubbleUp:
                raise
            except Exception as exc:
                return self._failed(request, name, params, call_id, exc, started)
            return self._finish_call(request, result, name, params, call_id, started)
        finally:
            self._order.leave(call_id)

    async def _decide(
        self, ask: Denial, name: str, params: Mapping[str, Any], call_id: str, *, sync: bool
    ) -> Resolution:
        """A policy's ask, answered as gr's loop answers it: the dashboard's desk (under
        ``ainvoke``), the agent's ``confirm=``, or nobody (a denial that says so)."""
        state = self._session.state
        approvals = state.approvals
        if sync:  # a blocked invoke() leaves no loop for a desk: the confirmer, or nobody
            approvals = Approvals(
                emit=state.emit,
                confirm=approvals.confirm,
                run_id=state.run_id,
                time_left=state.time_left,
            )
        return await approvals.decide(
            ask, name, params, tool_use_id=call_id, check=lambda edited: None
        )

    def _resolved(
        self,
        ask: Denial,
        resolution: Resolution,
        request: ToolCallRequest,
        params: Mapping[str, Any],
    ) -> tuple[ToolOutput | None, ToolCallRequest, Mapping[str, Any]]:
        if resolution.message is not None:
            return self._step.not_approved(ask, resolution.message), request, params
        if resolution.edited:
            edited = ToolCall(
                name=request.tool_call["name"],
                args=dict(resolution.input),
                id=request.tool_call.get("id"),
            )
            return None, request.override(tool_call=edited), resolution.input
        return None, request, params

    def _execute(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
        name: str,
        params: Mapping[str, Any],
        call_id: str,
        started: float,
    ) -> ToolMessage | Command[Any]:
        try:
            result = handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            return self._failed(request, name, params, call_id, exc, started)
        return self._finish_call(request, result, name, params, call_id, started)

    def _failed(
        self,
        request: ToolCallRequest,
        name: str,
        params: Mapping[str, Any],
        call_id: str,
        exc: Exception,
        started: float,
    ) -> ToolMessage:
        """A tool that raised: an error result the model can act on, as in gr's loop."""
        self._session.state.emit(
            ErrorEvent(source="tool", tool=name, error_type=type(exc).__name__, message=str(exc))
        )
        output = ToolOutput(
            f"Tool '{name}' failed: {type(exc).__name__}: {exc}. The workspace is unchanged "
            "unless the tool says otherwise; try again differently.",
            True,
        )
        return self._answer(request, name, params, call_id, output, started)

    def _finish_call(
        self,
        request: ToolCallRequest,
        result: ToolMessage | Command[Any],
        name: str,
        params: Mapping[str, Any],
        call_id: str,
        started: float,
    ) -> ToolMessage | Command[Any]:
        if not isinstance(result, ToolMessage):  # a Command: recorded, passed on as it is
            with self._session.lock:
                output = ToolOutput("(the tool returned a LangGraph Command)")
                self._step.ran(name, params, output)
                self._step.after(name, params, call_id, output, started)
            return result
        output = ToolOutput(result.text, result.status == "error")
        with self._session.lock:
            self._step.ran(name, params, output)
            extra = self._step.after(name, params, call_id, output, started)
        if not extra:
            return result
        return result.model_copy(update={"content": _with(result.content, extra)})

    def _answer(
        self,
        request: ToolCallRequest,
        name: str,
        params: Mapping[str, Any],
        call_id: str,
        output: ToolOutput,
        started: float,
    ) -> ToolMessage:
        """A call that did not run (or failed): its result, with what follows it."""
        with self._session.lock:
            extra = self._step.after(name, params, call_id, output, started)
        content = output.content if not extra else f"{output.content}\n\n{extra}"
        return ToolMessage(content=content, tool_call_id=call_id, name=name, status="error")

    def __repr__(self) -> str:
        return f"<GuardrailMiddleware for {self.run.run_id}: {self.run.status}>"


def _call_of(request: ToolCallRequest) -> tuple[str, Mapping[str, Any], str]:
    call = request.tool_call
    args = call.get("args")
    return (
        str(call.get("name") or ""),
        dict(args) if isinstance(args, Mapping) else {},
        str(call.get("id") or ""),
    )


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
