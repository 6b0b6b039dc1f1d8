Feature: Tools from MCP servers, over stdio and streamable HTTP
  An actor's `mcp_servers` join its tools: real MCP servers (written with the `mcp` SDK) are
  connected once when the executor opens and closed with it. Their tools go through the same
  loop as any other tool; every failure of a server reaches the model as an error result, the
  tokens are billed as always, and no server process outlives the executor.

  Background:
    Given the MCP test server "files" over stdio

  Scenario Outline: The model calls MCP tools and reads text, structured and partial results (<mode>)
    Given the actor's model replies:
      | text            | tool calls                                                                                                           |
      |                 | echo#c1 {"text": "hello"} ; add#c2 {"a": 2, "b": 3} ; structured_only#c3 {"city": "Rome"} ; picture#c4 ; nothing#c5 |
      | All four done.  |                                                                                                                      |
    When the actor is asked "Use the tools." in <mode> mode, with its MCP servers open
    Then the answer is "All four done."
    And the tool call c1 output is "hello"
    And the tool call c2 output is "{\n  \"sum\": 5\n}"
    And the tool call c3 output is "{\"city\": \"Rome\", \"celsius\": 21}"
    And the tool call c4 output is "a red square\n[cleveractors: left out content the model cannot read here: 1 image]"
    And the tool call c5 output is ""
    And the model's request 1 had the tool structured_only bound
    And the reported tokens are what the model reported for each call
    And 1 stdio server processes were started
    And no MCP server process is left running

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: An allow-list and a prefix choose and rename the server's tools
    Given the MCP server "files" has tools ["echo", "add"]
    And the MCP server "files" has prefix true
    When the actor's MCP servers are opened and closed
    Then the agent offered the tools files_add, files_echo
    And no MCP server process is left running

  Scenario: An allowed tool the server does not offer is named when the servers open
    Given the MCP server "files" has tools ["echo", "teleport"]
    When the actor's MCP servers are opened and closed
    Then opening failed with McpServerError "mcp server 'files' does not offer the allowed tool(s): teleport"
    And no MCP server process is left running

  Scenario: Two servers offering the same tool name is a configuration error naming both
    Given the MCP test server "more" over stdio
    When the actor's MCP servers are opened and closed
    Then opening failed with ConfigurationError "tool name 'echo' is offered twice: by mcp server 'files' and by mcp server 'more'"
    And no MCP server process is left running

  Scenario: Arguments that do not match the declared schema are never sent; an isError result is an error
    Given the actor's model replies:
      | text        | tool calls                                           |
      |             | echo#c1 {"text": 5} ; fail#c2 {"reason": "disk full"} |
      | Both broke. |                                                      |
    When the actor is asked "Try." in blocking mode, with its MCP servers open
    Then the answer is "Both broke."
    And the model's request 2 carries an error for call c1 mentioning "arguments do not match the schema at text: 5 is not of type 'string'"
    And the model's request 2 carries an error for call c2 mentioning "mcp server 'files' reported an error: Error executing tool fail: disk full"
    And the tool call c2 is recorded as an error
    And the reported tokens are what the model reported for each call

  Scenario: A call over its timeout is an error the model reads, and the server sees it cancelled
    Given the MCP server "files" has timeout_s 0.5
    And the actor's model replies:
      | text       | tool calls                  |
      |            | slow#c1 {"seconds": 30}     |
      | Too slow.  |                             |
    When the actor is asked "Wait." in blocking mode, with its MCP servers open
    Then the answer is "Too slow."
    And the model's request 2 carries an error for call c1 mentioning "timed out after 0.5s"
    And the MCP server saw the call cancelled
    And no MCP server process is left running

  Scenario: A concurrent server's calls of one batch run at the same time on its one session
    Given the MCP server "files" has concurrent true
    And the actor's model replies:
      | text      | tool calls                                            |
      |           | slow#c1 {"seconds": 0.6} ; slow#c2 {"seconds": 0.5}   |
      | Together. |                                                       |
    When the actor is asked "Both at once." in blocking mode, with its MCP servers open
    Then the answer is "Together."
    And the server started both slow calls before it ended either
    And the tool call c1 output is "waited 0.6s"
    And the tool call c2 output is "waited 0.5s"
    And 1 stdio server processes were started

  Scenario: A tool list the server changes is fetched again before the next round
    Given the actor's model replies:
      | text         | tool calls                     |
      |              | grow#c1 {"name": "fresh_tool"} |
      |              | fresh_tool#c2                  |
      | It grew.     |                                |
    When the actor is asked "Grow." in streaming mode, with its MCP servers open
    Then the answer is "It grew."
    And the model's request 1 had no tool fresh_tool bound
    And the model's request 2 had the tool fresh_tool bound
    And the tool call c2 output is "fresh_tool ran"

  Scenario: A server that was killed is reconnected on the next call
    Given the actor's model replies:
      | text    | tool calls                  |
      |         | echo#c1 {"text": "one"}     |
      | First.  |                             |
      |         | echo#c2 {"text": "two"}     |
      | Second. |                             |
    When the actor is asked "One.", its stdio server is killed, then it is asked "Two."
    Then the answer is "Second."
    And the tool call c2 output is "two"
    And 2 stdio server processes were started
    And no MCP server process is left running

  Scenario: A server that dies mid-call is an error the model reads; the next call reconnects
    Given the actor's model replies:
      | text      | tool calls                |
      |           | crash#c1                  |
      |           | echo#c2 {"text": "again"} |
      | Survived. |                           |
    When the actor is asked "Crash." in blocking mode, with its MCP servers open
    Then the answer is "Survived."
    And the model's request 2 carries an error for call c1 mentioning "mcp server 'files': the connection was lost during the call"
    And the tool call c2 output is "again"
    And the reported tokens are what the model reported for each call
    And 2 stdio server processes were started
    And no MCP server process is left running

  Scenario: A cancelled run cancels its MCP call at the server, and its tokens are kept
    Given the actor's model replies:
      | text | tool calls              |
      |      | slow#c1 {"seconds": 30} |
      | Late |                         |
    When the run of "Wait." is cancelled while the tool slow runs
    Then the MCP server saw the call cancelled
    And the cancelled run's tokens are reported
    And no MCP server process is left running

  Scenario: A program that exits without closing the executor leaves no server running
    When a program opens the actor by its first run and exits without closing it
    Then the program printed "hi"
    And no MCP server process is left running

  Scenario: A streamable HTTP server is used with a token from the environment, never shown
    Given the MCP test server "search" over streamable HTTP, its token from $SEARCH_TOKEN
    And the MCP server "search" has prefix true
    And the actor's model replies:
      | text   | tool calls                                                   |
      |        | search_echo#c1 {"text": "via http"} ; echo#c2 {"text": "via stdio"} |
      | Both.  |                                                              |
    When the actor is asked "Both." in streaming mode, with its MCP servers open
    Then the answer is "Both."
    And the tool call c1 output is "via http"
    And the tool call c2 output is "via stdio"
    And the secret appears in no result, tool output or log line

  Scenario: A wrong token is refused by the HTTP server when the servers open, the token unshown
    Given the MCP test server "search" over streamable HTTP, its token from $SEARCH_TOKEN
    And the MCP server "search" has headers {"Authorization": "Bearer ${SEARCH_TOKEN}x"}
    When the actor's MCP servers are opened and closed
    Then opening failed with McpServerError "mcp server 'search': cannot connect"
    And the error does not show the secret
    And no MCP server process is left running

  Scenario: Credentials in an HTTP server's URL are never shown when it refuses the connection
    The URL's user and password become basic auth, which replaces the bearer token: the test
    server refuses it.
    Given the MCP test server "search" over streamable HTTP, its token from $SEARCH_TOKEN
    And the MCP server "search" URL carries a password and an api_key
    And every log record is captured, down to DEBUG
    When the actor's MCP servers are opened and closed
    Then opening failed with McpServerError "mcp server 'search': cannot connect"
    And the URL's credentials appear in no error, result or log line
    And no MCP server process is left running

  Scenario: A token in an HTTP server's URL query is never shown while the server is used
    Given the MCP test server "search" over streamable HTTP, its token from $SEARCH_TOKEN
    And the MCP server "search" URL carries an api_key
    And the MCP server "search" has prefix true
    And every log record is captured, down to DEBUG
    And the actor's model replies:
      | text  | tool calls                          |
      |       | search_echo#c1 {"text": "via http"} |
      | Done. |                                     |
    When the actor is asked "Search." in blocking mode, with its MCP servers open
    Then the answer is "Done."
    And the tool call c1 output is "via http"
    And the URL's credentials appear in no error, result or log line

  Scenario: A variable the server's env names must be set
    Given the environment variable MCP_TEST_LOG is unset
    When the actor's MCP servers are opened and closed
    Then opening failed with ConfigurationError "mcp server 'files': env.MCP_TEST_LOG names the environment variable MCP_TEST_LOG, which is not set"

  Scenario: Without the mcp package, an actor with MCP servers names the extra to install
    When a program without the mcp package loads the actor
    Then the program printed "pip install 'cleveractors[mcp]'"

  Scenario: A streamable HTTP server that restarted is reconnected on the next call
    Given the MCP test server "search" over streamable HTTP, its token from $SEARCH_TOKEN
    And the MCP server "search" has prefix true
    And the actor's model replies:
      | text    | tool calls                            |
      |         | search_echo#c1 {"text": "before"}     |
      | First.  |                                       |
      |         | search_echo#c2 {"text": "after"}      |
      | Second. |                                       |
    When the actor is asked "One.", its HTTP server is restarted, then it is asked "Two."
    Then the answer is "Second."
    And the tool call c2 output is "after"

  Scenario: The web app opens the MCP servers when it starts and closes them when it stops
    When the web app serving the actor starts and stops
    Then while it served, the agent offered the tool echo
    And no MCP server process is left running

  Scenario: A removed tool and a protocol error are errors the model reads
    Given the actor's model replies:
      | text      | tool calls                                                                |
      |           | forget#c1 {"name": "echo"} ; echo#c2 {"text": "x"} ; protocol_error#c3    |
      |           | add#c4 {"a": 1, "b": 1}                                                   |
      | Forgot.   |                                                                           |
    When the actor is asked "Forget." in blocking mode, with its MCP servers open
    Then the answer is "Forgot."
    And the model's request 2 carries an error for call c2 mentioning "mcp server 'files' reported an error: Unknown tool: echo"
    And the model's request 2 carries an error for call c3 mentioning "mcp server 'files' refused the call: the test server refuses this request"
    And the model's request 3 had no tool echo bound

  # The first call after the stop may go out before the session has seen the server go (then
  # the connection is lost during that call), or after (then it cannot reconnect): which one
  # depends on how fast the loop is. The call after it always finds the server unreachable.
  Scenario: A server that cannot be reached again is an error the model reads
    Given the MCP test server "search" over streamable HTTP, its token from $SEARCH_TOKEN
    And the MCP server "search" has prefix true
    And the actor's model replies:
      | text    | tool calls                         |
      |         | search_echo#c1 {"text": "before"}  |
      | First.  |                                    |
      |         | search_echo#c2 {"text": "after"}   |
      |         | search_echo#c3 {"text": "again"}   |
      | Gone.   |                                    |
    When the actor is asked "One.", its HTTP server is stopped, then it is asked "Two."
    Then the answer is "Gone."
    And the model's request 4 carries an error for call c2 mentioning "mcp server 'search'"
    And the model's request 5 carries an error for call c3 mentioning "mcp server 'search' is unavailable: mcp server 'search': cannot connect"

  Scenario: Two servers of one agent built in code cannot share a name
    When an agent is built in code with two MCP servers named "files"
    Then building it failed with ConfigurationError "mcp server names must be unique; repeated: files"

  Scenario Outline: An MCP server entry with <problem> is refused, and its values are never shown
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        script: []
        mcp_servers:
          - <entry>
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "<message>"
    And the error does not show "hunter2"

    Examples:
      | problem                      | entry                                                                   | message                                                           |
      | neither command nor url      | {name: files, env: {A: hunter2}}                                        | give either 'command' (stdio) or 'url' (streamable HTTP)          |
      | both command and url         | {name: files, command: [x], url: "http://127.0.0.1:1/mcp"}              | give either 'command' (stdio) or 'url' (streamable HTTP)          |
      | env on an HTTP server        | {name: web, url: "http://127.0.0.1:1/mcp", env: {A: hunter2}}           | 'env' is for a 'command' server                                   |
      | cwd on an HTTP server        | {name: web, url: "http://127.0.0.1:1/mcp", cwd: hunter2}                | agent.mcp_servers.0.cwd: 'cwd' is for a 'command' server          |
      | headers on a command server  | {name: files, command: [x], headers: {X-Trace: hunter2}}                | 'headers' are for a 'url' server                                  |
      | a literal credential header  | {name: web, url: "http://127.0.0.1:1/mcp", headers: {Authorization: "Bearer hunter2"}} | agent.mcp_servers.0.headers.Authorization: looks like a credential: give it as '${VARIABLE}' |
      | a literal credential in env  | {name: files, command: [x], env: {API_TOKEN: hunter2}}                  | agent.mcp_servers.0.env.API_TOKEN: looks like a credential        |
      | a bad server name            | {name: "my files", command: [x], env: {A: hunter2}}                     | agent.mcp_servers.0.name                                          |
      | a zero timeout               | {name: files, command: [x], timeout_s: 0, env: {A: hunter2}}            | agent.mcp_servers.0.timeout_s                                     |
