Feature: Any LangChain provider from config
  `provider:` takes `openai`, `stub` and the providers of LangChain's `init_chat_model`, each built
  with its own integration class; `model_options` are passed through, `api_key_env` and `base_url`
  map to the class's own settings, and streamed usage is always requested. A provider whose
  integration package is missing is a one-line error naming the extra to install.

  Scenario: provider anthropic builds ChatAnthropic with its model options, key and base URL
    Given the environment variable ANTHROPIC_API_KEY holds a canary API key
    And an actor config file with this text:
      """
      name: claude
      agent:
        provider: anthropic
        model: claude-sonnet-4-20250514
        base_url: http://127.0.0.1:9
        request_timeout_s: 30
        model_options:
          max_tokens: 4096
          thinking: {type: enabled, budget_tokens: 2048}
      """
    When the actor is loaded from it
    Then the actor's chat model is a ChatAnthropic with:
      | setting           | value                                        |
      | model             | claude-sonnet-4-20250514                     |
      | max_tokens        | 4096                                         |
      | thinking          | {"type": "enabled", "budget_tokens": 2048}   |
      | anthropic_api_url | http://127.0.0.1:9                           |
      | default_request_timeout | 30.0                                   |
      | max_retries       | 0                                            |
      | stream_usage      | true                                         |
    And the actor's calls are recorded as anthropic's claude-sonnet-4-20250514

  Scenario: provider azure_openai maps base_url to the endpoint and reads its own key variable
    Given the environment variable AZURE_OPENAI_API_KEY holds a canary API key
    And an actor config file with this text:
      """
      name: azure
      agent:
        provider: azure_openai
        model: gpt-4o
        base_url: http://127.0.0.1:9
        model_options: {api_version: "2024-10-21"}
      """
    When the actor is loaded from it
    Then the actor's chat model is a AzureChatOpenAI with:
      | setting            | value              |
      | azure_endpoint     | http://127.0.0.1:9 |
      | openai_api_version | "2024-10-21"       |
      | stream_usage       | true               |

  Scenario Outline: A provider setting that cannot work is refused with the field that is wrong (<case>)
    Given the environment variable <key> holds a canary API key
    And an actor config file with this text:
      """
      name: refused
      agent:
        provider: <provider>
        model: some-model
        <setting>
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "<fragments>"

    Examples:
      | case                        | key               | provider  | setting                                 | fragments                                                                                                  |
      | integration not installed   | ANTHROPIC_API_KEY | ollama    | temperature: 0                          | agent.provider: provider 'ollama' needs the langchain-ollama package: pip install 'cleveractors[ollama]' |
      | no extra for it             | GROQ_API_KEY      | groq      | temperature: 0                          | agent.provider: provider 'groq' needs the langchain-groq package: pip install langchain-groq              |
      | model set twice             | ANTHROPIC_API_KEY | anthropic | model_options: {model: other}           | agent.model_options: model must be set with the agent's own fields                                         |
      | an option the class refuses | ANTHROPIC_API_KEY | anthropic | model_options: {max_tokens: lots}       | agent.model_options: ChatAnthropic rejected the settings: max_tokens: Input should be a valid integer      |
      | the key variable unset      | ANTHROPIC_API_KEY | anthropic | api_key_env: CLEVERACTORS_NO_SUCH_KEY   | agent.api_key_env: environment variable 'CLEVERACTORS_NO_SUCH_KEY' is not set (provider 'anthropic'        |
      | openai option set twice     | OPENAI_API_KEY    | openai    | model_options: {base_url: x}            | agent.model_options: base_url must be set with the agent's own fields                                      |
      | client retries turned on    | ANTHROPIC_API_KEY | anthropic | model_options: {max_retries: 5}         | agent.model_options: max_retries must be set with the agent's own fields                                   |
      | openai client retries       | OPENAI_API_KEY    | openai    | model_options: {max_retries: 5}         | agent.model_options: max_retries must be set with the agent's own fields                                   |
      | a keyless provider's key    | ANTHROPIC_API_KEY | ollama    | api_key_env: ANTHROPIC_API_KEY          | agent.api_key_env: provider 'ollama' takes no API key                                                      |
      | no base URL setting         | ANTHROPIC_API_KEY | google_vertexai | base_url: http://127.0.0.1:9      | agent.base_url: provider 'google_vertexai' has no base URL setting                                         |

  Scenario: A missing extra is one line
    Given an actor config file with this text:
      """
      name: local
      agent:
        provider: bedrock_converse
        model: anthropic.claude-3-5-sonnet
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "pip install 'cleveractors[bedrock]'"
    And the error's problem is one line

  Scenario: A ChatOpenAI built in code without stream_usage gets streamed usage requested
    Given a ChatOpenAI built in code for a server at http://127.0.0.1:9 without stream_usage
    When an agent is built around it
    Then the agent's model requests streamed usage, sharing the original's client
