"""The floor: the same tool loop on the bare `openai` SDK, no LangChain and no library.

What a LangChain-based library can approach but not beat: one `AsyncOpenAI` client, the tool
schemas sent as they are, message dicts appended as the conversation grows, a streamed reply
folded by hand (text pieces joined once, tool-call fragments grouped by index) and the usage
chunk read (`stream_options.include_usage`). It validates nothing and records nothing else.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from handwritten import ToolFunction, TurnTally
from openai import AsyncOpenAI


class BareSdkLoop:
    """One `AsyncOpenAI` client; `run_turn` blocks, `stream_turn` yields text as it comes."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        tools: Mapping[str, ToolFunction],
        schemas: Sequence[dict[str, Any]],
        timeout_s: float | None = None,
    ) -> None:
        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=api_key,
            max_retries=0,
            **({} if timeout_s is None else {"timeout": timeout_s}),
        )
        self._model = model
        self._tools = tools
        self._schemas = list(schemas)

    async def run_turn(self, message: str) -> TurnTally:
        tally = TurnTally()
        messages: list[dict[str, Any]] = [{"role": "user", "content": message}]
        while True:
            completion = await self._client.chat.completions.create(
                model=self._model, messages=messages, tools=self._schemas
            )
            tally.llm_calls += 1
            if completion.usage is not None:
                tally.prompt_tokens += completion.usage.prompt_tokens
                tally.completion_tokens += completion.usage.completion_tokens
            reply = completion.choices[0].message
            if not reply.tool_calls:
                tally.text = reply.content or ""
                return tally
            calls = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.function.name,
                        "arguments": call.function.arguments,
                    },
                }
                for call in reply.tool_calls
                if call.type == "function"
            ]
            messages.append({"role": "assistant", "content": reply.content, "tool_calls": calls})
            messages.extend(await self._run_tools(calls))

    async def stream_turn(self, message: str, tally: TurnTally) -> AsyncIterator[str]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": message}]
        while True:
            stream = await self._client.chat.completions.create(
                model=self._model,
                messages=messages,
                tools=self._schemas,
                stream=True,
                stream_options={"include_usage": True},
            )
            pieces: list[str] = []
            calls: dict[int, dict[str, Any]] = {}
            async for chunk in stream:
                if chunk.usage is not None:
                    tally.prompt_tokens += chunk.usage.prompt_tokens
                    tally.completion_tokens += chunk.usage.completion_tokens
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                if delta.content:
                    pieces.append(delta.content)
                    yield delta.content
                for fragment in delta.tool_calls or ():
                    call = calls.setdefault(
                        fragment.index,
                        {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                    )
                    if fragment.id:
                        call["id"] = fragment.id
                    if fragment.function is not None:
                        if fragment.function.name:
                            call["function"]["name"] += fragment.function.name
                        if fragment.function.arguments:
                            call["function"]["arguments"] += fragment.function.arguments
            tally.llm_calls += 1
            text = "".join(pieces)
            if not calls:
                tally.text = text
                return
            ordered = [calls[index] for index in sorted(calls)]
            messages.append({"role": "assistant", "content": text or None, "tool_calls": ordered})
            messages.extend(await self._run_tools(ordered))

    async def _run_tools(self, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = []
        for call in calls:
            function = call["function"]
            output = await self._tools[function["name"]](**json.loads(function["arguments"]))
            results.append({"role": "tool", "tool_call_id": call["id"], "content": output})
        return results
