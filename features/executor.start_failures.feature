Feature: A start that fails leaves nothing running; an executor dropped open says what it left
  An executor starts what it holds, its store and its agent's MCP servers (stdio server
  processes, HTTP sessions), in `open()` (`async with`) or in its first run. When the start fails
  at any point, everything it had started is closed before the error, unchanged, reaches the
  caller. An executor garbage-collected while something is still open warns with a
  ResourceWarning naming it, as asyncio and httpx do for what they leave open.

  Whether a server process is alive is checked while the event loop still runs: the loop's end
  cancels the sessions' tasks, which would stop a leaked server anyway.

  Background:
    Given the MCP test server "files" over stdio

  Scenario Outline: A Python tool and an MCP tool with the same name fail the start (<start>)
    Given the actor declares these tools:
      | name | handler     |
      | echo | get_weather |
    When the executor is started by <start>, which fails
    Then starting failed with ConfigurationError "tool name 'echo' is offered twice: by python and by mcp server 'files'"
    And right after the error, no MCP server process it started was alive
    And dropping the executor then warned of nothing

    Examples:
      | start                  |
      | open()                 |
      | its first run          |
      | its first streamed run |

  Scenario Outline: Two servers offering the same tool name fail the start (<start>)
    Given the MCP test server "more" over stdio
    When the executor is started by <start>, which fails
    Then starting failed with ConfigurationError "tool name 'echo' is offered twice: by mcp server 'files' and by mcp server 'more'"
    And right after the error, no MCP server process it started was alive
    And dropping the executor then warned of nothing

    Examples:
      | start         |
      | open()        |
      | its first run |

  Scenario Outline: A second server that exits at once fails the start after the first started (<start>)
    Given an MCP server "broken" whose process exits at once
    When the executor is started by <start>, which fails
    Then starting failed with McpServerError "mcp server 'broken': cannot connect"
    And right after the error, no MCP server process it started was alive
    And dropping the executor then warned of nothing

    Examples:
      | start         |
      | open()        |
      | its first run |

  Scenario Outline: A second server without an allowed tool fails the start after the first started (<start>)
    Given the MCP test server "more" over stdio
    And the MCP server "more" has tools ["echo", "teleport"]
    And the MCP server "more" has prefix true
    When the executor is started by <start>, which fails
    Then starting failed with McpServerError "mcp server 'more' does not offer the allowed tool(s): teleport"
    And right after the error, no MCP server process it started was alive
    And dropping the executor then warned of nothing

    Examples:
      | start         |
      | open()        |
      | its first run |

  Scenario Outline: A second server whose env names an unset variable fails the start after the first started (<start>)
    Given the MCP test server "more" over stdio
    And the MCP server "more" has env {"MCP_TEST_LOG": "${MCP_TEST_UNSET}"}
    And the environment variable MCP_TEST_UNSET is unset
    When the executor is started by <start>, which fails
    Then starting failed with ConfigurationError "mcp server 'more': env.MCP_TEST_LOG names the environment variable MCP_TEST_UNSET, which is not set"
    And right after the error, no MCP server process it started was alive
    And dropping the executor then warned of nothing

    Examples:
      | start         |
      | open()        |
      | its first run |

  Scenario: A failed open closes the store it had opened
    Given the actor keeps its store in a fresh sqlite file
    And the MCP test server "more" over stdio
    When the executor is started by open(), which fails
    Then starting failed with ConfigurationError "tool name 'echo' is offered twice"
    And right after the error, no MCP server process it started was alive
    And the executor's store was closed
    And dropping the executor then warned of nothing

  Scenario Outline: A store that cannot be opened fails the start before any server is started (<start>)
    The store opens first: a database that cannot be reached costs no server process.
    Given the actor keeps its store in a folder that does not exist
    When the executor is started by <start>, which fails
    Then starting failed with StoreError "cannot open sqlite:///"
    And no MCP server process was started
    And dropping the executor then warned of nothing

    Examples:
      | start         |
      | open()        |
      | its first run |

  Scenario Outline: An executor dropped without aclose() after <start> warns, naming what it left open
    Given the MCP test server "more" over stdio
    And the MCP server "more" has prefix true
    And the actor keeps its store in a fresh sqlite file
    And the actor's model replies:
      | text |
      | Hi.  |
    When the executor is started by <start>, then dropped without aclose()
    Then dropping the executor warned "unclosed executor 'weather-assistant' left open: mcp server 'files', mcp server 'more', its store"

    Examples:
      | start         |
      | open()        |
      | its first run |
