"""A scripted OpenAI server for long sessions: each reply chosen by the request's last message
(a user's message asks for a report, a tool's result is answered, a summarising request gets a
summary), so a conversation of any length, compacted whenever the loop decides, needs no script
written in advance. The window is the shipped server's own (`context_window`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

SUMMARY_REQUEST = "Summarise the conversation below"
"""How the loop's summarising request begins (`agents._compaction`)."""
SUMMARY_TEXT = "The user asked for reports on many topics; each report was fetched and noted."


class _ByLastMessage:
    """Chooses a reply from the request alone (stands in for the server's script)."""

    def __init__(self, report_facts: int) -> None:
        self.report_facts = report_facts

    def next_reply(self, body: Mapping[str, Any]) -> ScriptedReply:
        last = body["messages"][-1]
        content = str(last.get("content") or "")
        if last["role"] == "tool":
            return ScriptedReply(text="Noted: the report is in, and the opening time is 9:00.")
        if last["role"] == "user" and content.startswith(SUMMARY_REQUEST):
            return ScriptedReply(text=SUMMARY_TEXT)
        topic = content.split()[1] if content.startswith("Report ") else "misc"
        call = ScriptedToolCall(
            name="long_report", args={"topic": topic, "facts": self.report_facts}
        )
        return ScriptedReply(tool_calls=(call,))


class LongSessionServer(ScriptedOpenAIServer):
    """`ScriptedOpenAIServer` with a window, answering any number of report turns."""

    def __init__(self, *, context_window: int, report_facts: int) -> None:
        super().__init__([], context_window=context_window)
        self._script = _ByLastMessage(report_facts)  # type: ignore[assignment]  # duck-typed script


def is_summary_request(body: Mapping[str, Any]) -> bool:
    last = body["messages"][-1]
    return last["role"] == "user" and str(last.get("content") or "").startswith(SUMMARY_REQUEST)
