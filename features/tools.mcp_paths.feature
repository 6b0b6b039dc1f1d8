Feature: A stdio MCP server's relative paths mean the same from every folder
  An actor read from a file takes its stdio servers' relative paths from the file's folder, as
  it takes its handler modules and its SQLite path, so `cleveractors validate`, `run` and `serve`
  find the server whatever folder they are started from. The program is taken from there when
  it is a relative path with a `/`; an argument when it starts with `./` or `../`, names a file
  there, or names a folder there by a path with a `/`. Options, module and package names and
  paths found nowhere there are passed as written. With `cwd:` the server runs in that folder
  (relative: from the file's folder) and its command is passed as written.

  Scenario: validate started from another folder finds the server beside the actor file
    Given an actor file whose stdio MCP server "files" runs "python tool_server.py", the server's script beside it
    When cleveractors validate checks the actor file from another folder
    Then validate says the actor is OK, with the tool echo from mcp server 'files'

  Scenario: With cwd the server runs in that folder, its command passed as written
    Given an actor file whose stdio MCP server "files" runs "python -m tool_server" in the cwd "servers", the server's script in that folder
    When cleveractors validate checks the actor file from another folder
    Then validate says the actor is OK, with the tool echo from mcp server 'files'

  Scenario: Without cwd a module run with -m is looked for where validate runs, and is not found
    Given an actor file whose stdio MCP server "files" runs "python -m tool_server", the server's script beside it
    When cleveractors validate checks the actor file from another folder
    Then validate says the actor is INVALID, naming mcp server 'files'

  Scenario Outline: The argument <argument> is <taken>
    Given a folder holding the files "server.py", "tools/run.py" and "../shared.txt", and the folders "data/inbox" and "files_server"
    When an actor file in that folder runs its stdio MCP server as "python <argument>"
    Then the server's program is "python" and its argument is <taken>

    Examples:
      | argument       | taken                          |
      | server.py      | taken from the actor's folder  |
      | tools/run.py   | taken from the actor's folder  |
      | ./notes.txt    | taken from the actor's folder  |
      | ../shared.txt  | taken from the actor's folder  |
      | .              | taken from the actor's folder  |
      | data/inbox     | taken from the actor's folder  |
      | files_server   | passed as written              |
      | missing.py     | passed as written              |
      | lib/missing.py | passed as written              |
      | @scope/pkg     | passed as written              |
      | --root=./data  | passed as written              |
      | -u             | passed as written              |
      | /srv/server.py | passed as written              |

  Scenario Outline: The program <program> is <taken>
    Given a folder holding the files "server.py", "tools/run.py" and "../shared.txt", and the folders "data/inbox" and "files_server"
    When an actor file in that folder runs its stdio MCP server as "<program> serve"
    Then the server's program is <taken> and its argument is passed as written

    Examples:
      | program       | taken                         |
      | ./bin/server  | taken from the actor's folder |
      | bin/server    | taken from the actor's folder |
      | server.py     | passed as written             |
      | uvx           | passed as written             |
      | /usr/bin/env  | passed as written             |

  Scenario: A relative cwd is taken from the actor's folder, the command passed as written
    Given a folder holding the files "server.py", "tools/run.py" and "../shared.txt", and the folders "data/inbox" and "files_server"
    When an actor file in that folder runs its stdio MCP server in the cwd "tools" as "python server.py"
    Then the server runs in the actor's folder's "tools", its command "python server.py" as written

  Scenario: A streamable HTTP server's entry is left as it is
    Given a folder holding the files "server.py", "tools/run.py" and "../shared.txt", and the folders "data/inbox" and "files_server"
    When an actor file in that folder uses the streamable HTTP MCP server "http://127.0.0.1:9/mcp"
    Then the server's entry is the URL "http://127.0.0.1:9/mcp" with no command and no cwd
