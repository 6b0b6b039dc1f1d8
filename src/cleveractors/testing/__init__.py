"""Test doubles shipped with cleveractors, for your tests and ours.

- `ScriptedChatModel`: a real `BaseChatModel` that replays a script, blocking and streaming.
- `ScriptedOpenAIServer`: an OpenAI-compatible HTTP server on 127.0.0.1 that replays a script
  over the wire (SSE, tool-call fragments, the usage chunk) and records what it billed.
- `ScriptedAnthropicServer`: the same for the Anthropic Messages API (content blocks, thinking
  with signatures, cache usage, HTTP 529 and mid-stream `error` events).
- `ScriptedReply` / `ScriptedToolCall`: the script all of them replay (and the `stub` provider's
  `script`); `count_words`, `prompt_words`, `completion_words` and `call_arguments_text`: how
  the doubles bill a request and a reply, to compute the counts a test expects.
- `cleveractors.testing.wire`: the HTTP core both servers share, to script another protocol.

Nothing in the library imports this package: the script schema and `ScriptedChatModel` live
beside the `stub` provider that uses them, and are re-exported here unchanged.
"""

from cleveractors._script import (
    ScriptedReply,
    ScriptedToolCall,
    call_arguments_text,
    completion_words,
    count_words,
    prompt_words,
)
from cleveractors.providers._scripted_model import ScriptedChatModel, ScriptedRequest
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
    "call_arguments_text",
    "completion_words",
    "conversation_of",
    "count_words",
    "prompt_words",
]
