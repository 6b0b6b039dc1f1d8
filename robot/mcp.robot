*** Settings ***
Documentation       An actor whose tools come from an MCP server over stdio (our test server,
...                 written with the `mcp` SDK) and from Python, on `ChatOpenAI` against the
...                 scripted OpenAI-compatible server: the counts equal the server's bill, every
...                 MCP failure is an error the model reads, and no server process is left behind.
Resource            resources/common.resource
Library             McpPathsLibrary
Test Tags           wire    mcp
Test Timeout        60 seconds
Test Setup          Record MCP Server Processes
Test Teardown       Run Keywords    Close Actor    AND    Stop Scripted OpenAI Servers
...                 AND    Remove The Folders


*** Test Cases ***
Two Calls Of One MCP Tool Beside A Python Tool Are Billed As The Server Billed
    [Documentation]    One reply calls the MCP tool echo twice and the Python tool once; the
    ...    model reads each output, and the reported tokens equal the server's bill.
    [Template]    MCP And Python Tools Should Answer In One Round
    blocking
    streaming

A Server Killed Mid-Call Is An Error The Model Reads, And The Turn Completes
    [Template]    A Killed MCP Server Should Be An Error The Model Reads
    blocking
    streaming

A Stdio Server Beside The Actor File Is Found From Another Folder
    [Documentation]    The server's `python tool_server.py` is taken from the actor file's
    ...    folder: `validate` and `run`, started in an empty folder, start it and call it.
    ${actor}=    Actor File With Its MCP Server Beside It
    Run Cleveractors From Another Folder    validate    ${actor}
    Cleveractors Should Have Succeeded
    Output Should Start With    OK: beside (13 tools)
    Run Cleveractors From Another Folder    run    ${actor}    Echo Paris.    --json
    Cleveractors Should Have Succeeded
    Json Result Should Have Tool Output    call_echo    Paris
    No MCP Server Process Should Be Running


*** Keywords ***
MCP And Python Tools Should Answer In One Round
    [Arguments]    ${mode}
    ${answer}=    Send Chat Message Over The Wire    wire_mcp.yaml    Echo and weather, please.
    ...    mode=${mode}
    Should Be Equal    ${answer}    Paris and Rome were echoed, and Paris has light rain.
    Tool Call Should Have Output    call_echo_paris    Paris
    Tool Call Should Have Output    call_echo_rome    Rome
    Server Should Have Received Requests    2
    Reported Tokens Should Equal Billed
    Close Actor
    No MCP Server Process Should Be Running

A Killed MCP Server Should Be An Error The Model Reads
    [Arguments]    ${mode}
    ${answer}=    Send Chat Message Over The Wire    wire_mcp_crash.yaml    Read the file.
    ...    mode=${mode}
    Should Be Equal    ${answer}    The file server broke down, sorry.
    Tool Call Should Have Failed Mentioning    call_crash
    ...    mcp server 'files': the connection was lost during the call
    Reported Tokens Should Equal Billed
    Close Actor
    No MCP Server Process Should Be Running
