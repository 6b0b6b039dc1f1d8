*** Settings ***
Documentation       SIGTERM (as `timeout`, `docker stop`, systemd and Kubernetes send it) stops
...                 `cleveractors run` as Ctrl-C does and drains `cleveractors serve`; MCP stdio
...                 servers are stopped quietly; one that dies at start is reported with its exit
...                 code and last stderr lines. The venv is not on PATH: `python` in an MCP
...                 server's command is the interpreter running cleveractors.
Library             SignalsLibrary.py
Test Tags           cli    mcp
Test Timeout        90 seconds


*** Test Cases ***
SIGTERM During An MCP Call Stops The Run Like Ctrl-C And Bills It
    ${actor}    Actor With A Slow MCP Tool And A Store
    Terminate Run In A Terminal When The MCP Tool Starts    ${actor}    Wait, please.
    Exit Code Should Be    143
    Output Should Contain    terminated (SIGTERM); the run was cancelled
    Usage Table Total Should Be    27
    Ledger Should Bill Tokens    ${actor}    27
    MCP Servers Should Have Exited    ${actor}
    Nothing Should Be Printed After The Exit

SIGTERM On Serve Cancels A Stream Past The Grace Period, Bills It Once And Exits
    ${actor}    Actor With A Slow MCP Tool And A Store
    ${url}    Serve Actor    ${actor}    --graceful-timeout    1
    Start A Chat Stream    ${url}    Wait, please.
    Terminate Serving When The MCP Tool Starts    ${actor}
    Exit Code Should Be    -15
    ${stream}    Stream
    Should Contain    ${stream}    tool_call_started
    Ledger Should Bill Tokens    ${actor}    27
    MCP Servers Should Have Exited    ${actor}

SIGTERM On Serve Lets A Stream Within The Grace Period End, Billed Once
    ${actor}    Actor With A Slow MCP Tool And A Store    seconds=2
    ${url}    Serve Actor    ${actor}    --graceful-timeout    30
    Start A Chat Stream    ${url}    Wait, please.
    Terminate Serving When The MCP Tool Starts    ${actor}
    Exit Code Should Be    -15
    ${stream}    Stream
    Should Contain    ${stream}    event: run_finished
    Should Contain    ${stream}    Done.
    ${total}    Streamed Total Tokens
    Should Be True    ${total} > 27
    Ledger Should Bill Tokens    ${actor}    ${total}
    MCP Servers Should Have Exited    ${actor}

SIGTERM Stops Validate While An MCP Server Connects, Without A Traceback
    ${actor}    Actor Whose MCP Server Never Answers
    Terminate Validate Once The MCP Server Runs    ${actor}
    Exit Code Should Be    143
    Output Should Not Contain    Traceback
    MCP Servers Should Have Exited    ${actor}

An MCP Server That Dies At Start Is Reported With Its Exit Code And Last Lines
    ${actor}    Actor Whose MCP Server Dies At Start
    Validate In Another Path    ${actor}
    Exit Code Should Be    1
    Output Should Contain    (exit code 1)
    Output Should Contain    loading the weather
    Output Should Contain    ModuleNotFoundError: No module named 'weather_xyz'

The Example MCP Server Serves The Example Actor
    ${result}    Run The Example MCP Actor
    Exit Code Should Be    0
    Should Be Equal    ${result}[tool_calls][0][status]    ok
    Should Be Equal    ${result}[tool_calls][0][output]    Paris: 18°C, light rain
    Docs MCP Server Example Should Be The Example File
