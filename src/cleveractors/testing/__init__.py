"""Test doubles shipped with cleveractors, for your tests and ours.

- `ScriptedChatModel`: a real `BaseChatModel` that replays a script, blocking and streaming.
- `ScriptedOpenAIServer`: an OpenAI-compatible HTTP server on 127.0.0.1 that replays a script
  over the wire (SSE, tool-call fragments, the usage chunk) and records what it billed.
"""

from cleveractors.testing.openai_server import (
    BilledCall,
    BilledTotal,
    ScriptedOpenAIServer,
    conversation_of,
)
from cleveractors.testing.script import ScriptedReply, ScriptedToolCall, count_words
from cleveractors.testing.scripted_model import ScriptedChatModel, ScriptedRequest

__all__ = [
    "BilledCall",
    "BilledTotal",
    "ScriptedChatModel",
    "ScriptedOpenAIServer",
    "ScriptedReply",
    "ScriptedRequest",
    "ScriptedToolCall",
    "conversation_of",
    "count_words",
]
