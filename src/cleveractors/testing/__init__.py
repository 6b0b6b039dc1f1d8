"""Test doubles shipped with cleveractors, for your tests and ours.

- `ScriptedChatModel`: a real `BaseChatModel` that replays a script, blocking and streaming.
- `ScriptedOpenAIServer`: an OpenAI-compatible HTTP server on 127.0.0.1 that replays a script
  over the wire (SSE, tool-call fragments, the usage chunk) and records what it billed.
- `ScriptedAnthropicServer`: the same for the Anthropic Messages API (content blocks, thinking
  with signatures, cache usage, HTTP 529 and mid-stream `error` events).
- `cleveractors.testing.wire`: the HTTP core both servers share, to script another protocol.
"""

from cleveractors.testing.anthropic_server import (
    BilledAnthropicCall,
    ScriptedAnthropicReply,
    ScriptedAnthropicServer,
)
from cleveractors.testing.openai_server import (
    BilledCall,
    BilledTotal,
    ScriptedOpenAIServer,
    conversation_of,
)
from cleveractors.testing.script import ScriptedReply, ScriptedToolCall, count_words
from cleveractors.testing.scripted_model import ScriptedChatModel, ScriptedRequest

__all__ = [
    "BilledAnthropicCall",
    "BilledCall",
    "BilledTotal",
    "ScriptedAnthropicReply",
    "ScriptedAnthropicServer",
    "ScriptedChatModel",
    "ScriptedOpenAIServer",
    "ScriptedReply",
    "ScriptedRequest",
    "ScriptedToolCall",
    "conversation_of",
    "count_words",
]
