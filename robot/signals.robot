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

SIGTERM On Serve Cancels A /chat Stream Past The Grace Period, Ends It With run_failed, Bills It Once
    [Template]    SIGTERM Past The Grace Period Ends The Stream With
    /chat    event: run_failed    "type":"ServerShuttingDown"    "total_tokens":27

SIGTERM On Serve Cancels A /v1 Stream Past The Grace Period, Ends It With An Error Chunk, Bills It Once
    [Template]    SIGTERM Past The Grace Period Ends The Stream With
    /v1/chat/completions    "type":"api_error"    "code":"ServerShuttingDown"

SIGTERM On Serve Cancels An /ai-sdk Stream Past The Grace Period, Ends It With An Error Part, Bills It Once
    [Template]    SIGTERM Past The Grace Period Ends The Stream With
    /ai-sdk    "type":"error","errorText":"ServerShuttingDown:    "finishReason":"error"    "total_tokens":27

SIGTERM On Serve Cancels An /ag-ui Stream Past The Grace Period, Ends It With RUN_ERROR, Bills It Once
    [Template]    SIGTERM Past The Grace Period Ends The Stream With
    /ag-ui    "type":"RUN_ERROR"    "code":"ServerShuttingDown"

SIGTERM On Serve Bills A Cancelled Run That Takes A While To Stop Before The Store Closes
    ${actor}    Actor With A Tool Slow To Stop And A Store
    ${url}    Serve Actor    ${actor}    --graceful-timeout    1
    Start A Stream    ${url}    /chat    Where is the Louvre?
    Terminate Serving When The Stream Shows    event: tool_call_started
    Exit Code Should Be    -15
    Stream Should End With    event: run_failed    "type":"ServerShuttingDown"
    Ledger Should Bill Tokens    ${actor}    27
    Output Should Not Contain    the store is not open
    Output Should Not Contain    Traceback

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


*** Keywords ***
SIGTERM Past The Grace Period Ends The Stream With
    [Documentation]    A stream on ROUTE is in flight (its MCP tool running) when `serve` gets
    ...    SIGTERM; the grace period (1 s) ends and the stream is cancelled: its last events
    ...    hold TEXTS, and the ledger bills the run's one LLM call (27 tokens) once.
    [Arguments]    ${route}    @{texts}
    ${actor}    Actor With A Slow MCP Tool And A Store
    ${url}    Serve Actor    ${actor}    --graceful-timeout    1
    Start A Stream    ${url}    ${route}    Wait, please.
    Terminate Serving When The MCP Tool Starts    ${actor}
    Exit Code Should Be    -15
    Stream Should End With    @{texts}
    Ledger Should Bill Tokens    ${actor}    27
    MCP Servers Should Have Exited    ${actor}
    Output Should Not Contain    Traceback
