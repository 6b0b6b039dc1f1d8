Feature: The scripted OpenAI server can refuse messages as the API does
  `ScriptedOpenAIServer(script, checks_messages=True)` answers HTTP 400 `invalid_request_error`
  (recorded, billed nothing, no reply taken) for messages the Chat Completions API refuses, by
  the `openai` SDK's message param types: a content part of a type the role does not take, a
  role it does not know, an assistant message whose `tool_calls` are not all answered by the
  tool messages right after it, and a tool message answering no call. Off by default.

  Scenario Outline: <what> is refused
    Given a scripted OpenAI server checking messages, answering "Fine."
    When it is sent the messages <messages>
    Then it refuses with HTTP 400 saying "<saying>"
    And no reply was taken

    Examples:
      | what                               | messages                                                                                                                                                              | saying                                                               |
      | a thinking block                   | [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]}, {"role": "user", "content": "Go on"}]                  | Invalid value: 'thinking'. Supported values are: 'text', 'refusal'. (messages[1].content[0].type) |
      | an unknown role                    | [{"role": "robot", "content": "Hi"}]                                                                                                                                  | Invalid value: 'robot'                                               |
      | a call without its result          | [{"role": "user", "content": "Hi"}, {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "user", "content": "Go on"}] | The following tool_call_ids did not have response messages: c1       |
      | a call never answered              | [{"role": "user", "content": "Hi"}, {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]            | The following tool_call_ids did not have response messages: c1       |
      | a result answering no call         | [{"role": "user", "content": "Hi"}, {"role": "tool", "tool_call_id": "c9", "content": "x"}]                                                                          | messages with role 'tool' must be a response to a preceeding message |

  Scenario: Calls answered by their results, and parts the roles take, are answered
    Given a scripted OpenAI server checking messages, answering "Fine."
    When it is sent the messages [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "x"}, {"role": "tool", "tool_call_id": "c1", "content": "again"}]
    Then it answers "Fine."

  Scenario: Without the checks the same messages are answered
    Given a scripted OpenAI server answering "Fine."
    When it is sent the messages [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]}]
    Then it answers "Fine."
