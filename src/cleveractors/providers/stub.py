"""The `stub` provider: a `ScriptedChatModel` replaying the config's `script`, fully offline."""

from __future__ import annotations

from cleveractors.config import LLMAgentConfig
from cleveractors.providers._scripted_model import ScriptedChatModel

__all__ = ["make_stub_model"]


def make_stub_model(config: LLMAgentConfig) -> ScriptedChatModel:
    """Build the scripted model (the config validator guarantees a script is present).

    Every run replays the script from its first reply: an executor (or `serve`) built on a stub
    actor answers any number of messages, each the same way.
    """
    return ScriptedChatModel(replies=list(config.script or ()), replay_per_run=True)
