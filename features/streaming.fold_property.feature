@property
Feature: A streamed reply folds into the message ainvoke returns, for every provider (property-based)
  Hypothesis generates replies (thinking with its signature, redacted thinking, text with
  citations, parallel tool calls of the same tool with arguments valid, cut off or not an
  object, usage with token details) and cuts each into the chunks the provider's LangChain
  integration streams: langchain-openai over Chat Completions and over the Responses API
  (output_version v0 and responses/v1), langchain-anthropic and langchain-google-genai. For
  each, the fold must equal what langchain-core's own merge makes of the same chunks (what
  `ainvoke` returns when it streams) on every field but the tool calls, which follow our rule:
  grouped by index then id, arguments that are not a JSON object kept as invalid calls. The
  text deltas carry the visible text only, never the thinking. Each example draws its shape;
  `nox -s property_tests` runs many more examples.

  Scenario: The fold of every provider's chunks is langchain-core's merge, tool calls by our rule
    Given streamed replies shaped the way openai_chat, openai_responses_v0, openai_responses_v1, anthropic and google_genai stream them
    When the fold property is checked on CLEVERACTORS_PROPERTY_EXAMPLES examples (default 1000)
    Then the fold property holds for every example
    And the fold property was checked on at least 100 examples of each shape
