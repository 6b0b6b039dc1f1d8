Feature: Every code example in the README and the docs runs as the page shows it
  Each Python and YAML block of README.md and docs/**/*.md runs offline (against the stub
  provider, `ScriptedChatModel` or the scripted servers of `cleveractors.testing`), or is
  marked `<!-- not-run: REASON -->`. A Python block followed by `<!-- prints -->` and a text
  block must print exactly that text. A YAML block is an actor config (or a fragment of one)
  that must load; a complete stub actor must also answer. `<!-- file: NAME -->` writes a block
  into the page's working directory for the blocks after it. docs/testing.md describes these
  markers for contributors.

  Scenario: Every example of the README and the docs runs, or says why it does not
    Given the README and every page under docs/
    When every example on them is run
    Then no example failed
    And at least 30 examples ran

  Scenario: A block that raises is named by its page and line
    Given a page "broken.md":
      """
      # A page

      ```python
      numbers = [1, 2]
      print(numbers[5])
      ```
      """
    When every example on it is run
    Then the failures are exactly:
      | failure                                                                |
      | broken.md:3: IndexError: list index out of range (line 2 of the block) |

  Scenario: A block that prints something other than the page shows fails
    Given a page "prints.md":
      """
      ```python
      print("Sunny in Paris.")
      ```

      <!-- prints -->
      ```text
      Rainy in Paris.
      ```
      """
    When every example on it is run
    Then the failures are exactly:
      | failure                                                                      |
      | prints.md:1: printed 'Sunny in Paris.', but the page shows 'Rainy in Paris.' |

  Scenario: The blocks of a page share a working directory, names and an event loop
    Given a page "shared.md":
      """
      <!-- file: actor.yaml -->
      ```yaml
      name: weather
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
          - text: Sunny in Paris.
      ```

      ```python
      from cleveractors import ActorExecutor

      executor = ActorExecutor.from_config("actor.yaml")
      ```

      ```python
      result = await executor.execute("Weather in Paris?")
      print(result.text, result.llm_calls)
      ```

      <!-- prints -->
      ```text
      Sunny in Paris. 2
      ```
      """
    When every example on it is run
    Then no example failed
    And at least 3 examples ran

  Scenario: A stub actor that does not answer fails, and so does a config that does not load
    Given a page "actors.md":
      """
      ```yaml
      name: short-script
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
      ```

      ```yaml
      agent:
        max_tool_round: 3
      ```
      """
    When every example on it is run
    Then the failures are exactly:
      | failure                                                                                                                                          |
      | actors.md:1: ScriptExhaustedError: scripted model has no reply left for call 2 (the script has 1)                                                |
      | actors.md:11: ConfigurationError: <dict>: invalid actor config (1 problem(s)) agent.max_tool_round: unknown key; did you mean 'max_tool_rounds'? |

  Scenario: A marker must be known, and a block not run must say why
    Given a page "markers.md":
      """
      <!-- not run: a typo -->
      ```python
      raise SystemExit("this must not run")
      ```

      <!-- not-run: -->
      ```python
      raise SystemExit("nor this")
      ```

      <!-- not-run: needs a real OpenAI key -->
      ```python
      raise SystemExit("nor this one")
      ```
      """
    When every example on it is run
    Then the failures are exactly:
      | failure                                                       |
      | markers.md:2: unknown marker 'not run: a typo' before a block |
      | markers.md:7: a not-run marker must give its reason           |
