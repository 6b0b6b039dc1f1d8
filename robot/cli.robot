*** Settings ***
Documentation       The `cleveractors` console script, run as a real subprocess on the offline demo
...                 actor, on actors written for the test, and against a scripted OpenAI-compatible
...                 server (`--base-url`) whose billing record is the truth for the usage table.
Library             Collections
Library             CliLibrary.py
Library             OperatingSystem


*** Variables ***
${MESSAGE}      What's the weather in Paris and in Rome?
@{FIVE PROBLEMS}
...             agent.temperature: Input should be a valid number, unable to parse string as a number (got 'hot')
...             agent.tools.1.concurrent: a tool with ends_turn: true cannot be concurrent: true (got True)
...             agent.colour: unknown key
...             agent.tools.1.name: tool names must be unique; tool 0 is named 'get_weather' too
...             agent.script.0.tool_calls.0.name: calls 'get_wether', which the actor does not declare (declared: get_weather)


*** Test Cases ***
Demo Actor Streams Its Answer With Tool Progress And A Usage Table
    ${demo}    Demo Actor
    Run Actor    ${demo}    ${MESSAGE}
    Command Should Succeed
    ${answer}    Scripted Answer Of    ${demo}
    Output Should Show Answer    ${answer}
    Output Should Show Tool Call    get_weather    city=Paris
    Output Should Show Tool Call    get_weather    city=Rome
    Run Keyword And Expect Error
    ...    output does not show tool call get_weather(city="Oslo") starting, then finishing
    ...    Output Should Show Tool Call    get_weather    city=Oslo
    Usage Table Should List Every Scripted Call    ${demo}

On A Terminal A Spinner Runs While The Model Thinks And Tools Run
    ${demo}    Demo Actor Without Delays
    Run Actor In A Terminal    ${demo}    ${MESSAGE}
    Command Should Succeed
    Output Should Show Spinner    thinking
    Output Should Show Spinner    running get_weather(city="Paris"), get_weather(city="Rome")
    Output Should Show Tool Call    get_weather    city=Rome
    ${answer}    Scripted Answer Of    ${demo}
    Output Should Show Answer    ${answer}
    Usage Table Should List Every Scripted Call    ${demo}

On A Terminal No Stream Shows A Spinner Until The Answer
    ${demo}    Demo Actor Without Delays
    Run Actor In A Terminal    ${demo}    ${MESSAGE}    --no-stream
    Command Should Succeed
    Output Should Show Spinner    thinking
    ${answer}    Scripted Answer Of    ${demo}
    Output Should Show Answer    ${answer}

Live Output Shows Failed Calls, Condensed Outputs And The Synthesis Step
    ${actor}    Actor That Reaches Its Limits
    Run Actor    ${actor}    ${MESSAGE}
    Command Should Succeed
    Output Should Show Tool Call    get_weather    city=Paris
    Output Should Show Failed Tool Call    get_weather    {"city":${SPACE}
    Output Should Show Condensed Output Of    get_weather
    Output Should Show Synthesis Because    max_rounds
    ${answer}    Scripted Answer Of    ${actor}
    Output Should Show Answer    ${answer}
    Usage Table Should List Every Scripted Call    ${actor}

Condensed Tool Output Is Not Shown As Answer Text
    [Documentation]    The condensing call's reply is for the model only (core bug: leaks as text).
    ${actor}    Actor That Reaches Its Limits
    Run Actor    ${actor}    ${MESSAGE}
    Command Should Succeed
    ${condensed}    Scripted Reply Text    ${actor}    2
    Output Should Not Show    ${condensed}

Live Output Shows Calls Skipped After A Tool Ended The Turn
    ${actor}    Actor With A Tool That Ends The Turn
    Run Actor    ${actor}    ${MESSAGE}
    Command Should Succeed
    Output Should Show Tool Call    convert_temperature    celsius=${18}    to=fahrenheit
    Output Should Show Skipped Tool Call    get_weather    city=Paris

Live Usage Table Shows The Tokens Of The Result
    ${demo}    Demo Actor Without Delays
    Run Actor    ${demo}    ${MESSAGE}    --json
    ${result}    Output Should Be An Execution Result
    Run Actor    ${demo}    ${MESSAGE}
    Command Should Succeed
    Usage Table Should Match Result    ${result}
    Usage Table Total Should Be    ${result.total_tokens}

Usage Table Shows Cached And Reasoning Tokens And The Cost
    ${actor}    Set Variable    ${CURDIR}/actors/stub_priced.yaml
    Run Actor    ${actor}    Weather in Paris?    --json
    ${result}    Output Should Be An Execution Result
    Should Be Equal As Numbers    ${result.cost_usd}    0.010680
    Run Actor    ${actor}    Weather in Paris?
    Command Should Succeed
    Usage Table Should Match Result    ${result}

Live Usage Table Shows What The Provider Billed
    ${demo}    Demo Actor Without Delays
    ${remote}    Remote Copy Of Actor    ${demo}
    ${base_url}    Start Scripted OpenAI Server    ${demo}
    Run Actor    ${remote}    ${MESSAGE}    --base-url    ${base_url}
    Command Should Succeed
    ${answer}    Scripted Answer Of    ${demo}
    Output Should Show Answer    ${answer}
    Output Should Show Tool Call    get_weather    city=Paris
    Output Should Show Tool Call    get_weather    city=Rome
    Usage Table Should Match Billed Calls
    [Teardown]    Stop Scripted OpenAI Server

No Stream Waits For The Whole Answer
    ${demo}    Demo Actor Without Delays
    ${remote}    Remote Copy Of Actor    ${demo}
    ${base_url}    Start Scripted OpenAI Server    ${demo}
    Run Actor    ${remote}    ${MESSAGE}    --no-stream    --base-url    ${base_url}
    Command Should Succeed
    Scripted Server Should Have Answered Without Streaming
    ${answer}    Scripted Answer Of    ${demo}
    Output Should Show Answer    ${answer}
    Output Should Show Finished Tool Call    get_weather    city=Paris
    Output Should Show Finished Tool Call    get_weather    city=Rome
    Usage Table Should Match Billed Calls
    [Teardown]    Stop Scripted OpenAI Server

JSON Output Is The Execution Result
    ${demo}    Demo Actor Without Delays
    Run Actor    ${demo}    ${MESSAGE}    --json
    Command Should Succeed
    ${result}    Output Should Be An Execution Result
    ${answer}    Scripted Answer Of    ${demo}
    Should Be Equal    ${result.answer}    ${answer}
    ${first}    Scripted Reply Text    ${demo}    1
    Should Be Equal    ${result.text}    ${first}\n\n${answer}
    Should Be True    ${result.prompt_tokens} > 0 and ${result.completion_tokens} > 0
    Result Should Record Tool Call    ${result}    get_weather    city=Paris
    Result Should Record Tool Call    ${result}    get_weather    city=Rome

Events Output Is One Typed Event Per Line
    ${demo}    Demo Actor Without Delays
    Run Actor    ${demo}    ${MESSAGE}    --events
    Command Should Succeed
    ${events}    Output Should Be Event Lines
    Events Should Include Kinds    ${events}
    ...    round_started    text_delta    usage_recorded    tool_call_started    tool_call_finished
    ...    run_finished
    ${streamed}    Streamed Text Of Events    ${events}    2
    ${answer}    Scripted Answer Of    ${demo}
    Should Be Equal    ${streamed}    ${answer}

Validate Accepts The Demo Actor
    ${demo}    Demo Actor
    Run Cleveractors    validate    ${demo}
    Command Should Succeed
    Output Should List Tools    OK: weather-assistant (2 tools)
    ...    get_weather [python]    convert_temperature [python]
    Error Output Should Not Contain    Warning

Validate Checks A Stub Script's Tool Arguments Against The Tool's Schema
    ${actor}    Actor Whose Script Calls A Tool With Arguments Its Schema Refuses
    Run Cleveractors    validate    ${actor}
    Command Should Fail With Exit Code    1
    Error Output Should Be Lines
    ...    INVALID: ${actor}: the script's tool calls do not fit their tools (1 problem)
    ...    ${SPACE * 2}agent.script.1.tool_calls.0.args: script step 2 calls 'get_weather' with arguments that fail its schema at city: 42 is not of type 'string'

Validate Accepts The Old Name Of A Renamed Key And Warns
    ${actor}    Actor With The Old Name Of Max Tool Rounds
    Run Cleveractors    validate    ${actor}
    Command Should Succeed
    Output Should List Tools    OK: cli-test (1 tool)    get_weather [python]
    Error Output Should Contain
    ...    DeprecationWarning: agent.tool_max_rounds is deprecated, use agent.max_tool_rounds; the old name goes in 1.0

Validate Connects The MCP Servers And Lists Their Tools
    Set Environment Variable    MCP_TEST_LOG    ${TEMPDIR}${/}cleveractors-cli-mcp.log
    Run Cleveractors    validate    ${CURDIR}${/}actors${/}wire_mcp.yaml
    Command Should Succeed
    Output Should List Tools    OK: wire-mcp (14 tools)
    ...    get_weather [python]    echo [mcp server 'files']    add [mcp server 'files']
    ...    structured_only [mcp server 'files']    picture [mcp server 'files']
    ...    fail [mcp server 'files']    slow [mcp server 'files']    crash [mcp server 'files']
    ...    secret_seen [mcp server 'files']    grow [mcp server 'files']
    ...    protocol_error [mcp server 'files']    nothing [mcp server 'files']
    ...    forget [mcp server 'files']    whose_call [mcp server 'files']

Run Shows MCP Tool Calls Like Any Other
    Set Environment Variable    MCP_TEST_LOG    ${TEMPDIR}${/}cleveractors-cli-mcp.log
    Run Actor    ${CURDIR}${/}actors${/}wire_mcp.yaml    Echo and weather, please.
    Command Should Succeed
    Output Should Show Tool Call    echo    text=Paris
    Output Should Show Tool Call    get_weather    city=Paris
    Output Should Show Tool Call    echo    text=Rome
    Output Should Show Answer    Paris and Rome were echoed, and Paris has light rain.

Validate Names A Mistyped Field And An Unimportable Handler In One Run
    ${actor}    Actor With Mistyped Field And Unimportable Handler
    ${actor_dir}    Folder Of    ${actor}
    Run Cleveractors    validate    ${actor}
    Command Should Fail With Exit Code    1
    Error Output Should List Problems
    ...    agent.tool_max_round: unknown key; did you mean 'max_tool_rounds'?
    ...    agent.tools.0: tool 'get_weather': handler 'nowhere.weather:get_weather' cannot be imported: ModuleNotFoundError: No module named 'nowhere'; looked for nowhere.py or nowhere/ beside the actor config in ${actor_dir}, then on sys.path; put the module beside the actor config, or make it importable (pip install your package, or set PYTHONPATH)

Validate Names A Missing Model With The Config's Other Problems
    ${actor}    Remote Actor Without A Model And With A Mistyped Field
    Run Cleveractors    validate    ${actor}
    Command Should Fail With Exit Code    1
    Error Output Should List Problems
    ...    agent.model: Field required for provider 'openai' (only provider 'stub' has a default model)
    ...    agent.tool_max_round: unknown key; did you mean 'max_tool_rounds'?

Validate Names Every Handler That Cannot Be Imported
    ${actor}    Actor With Unimportable Handlers
    ${actor_dir}    Folder Of    ${actor}
    ${demo_module}    Module File Of    cleveractors.demo
    Run Cleveractors    validate    ${actor}
    Command Should Fail With Exit Code    1
    Error Output Should List Problems
    ...    agent.tools.0: tool 'get_weather': handler 'nowhere.weather:get_weather' cannot be imported: ModuleNotFoundError: No module named 'nowhere'; looked for nowhere.py or nowhere/ beside the actor config in ${actor_dir}, then on sys.path; put the module beside the actor config, or make it importable (pip install your package, or set PYTHONPATH)
    ...    agent.tools.1: tool 'convert': handler 'cleveractors.demo:no_such_function' cannot be imported: module 'cleveractors.demo' (${demo_module}) has no 'no_such_function'

Validate Names A Missing API Key Variable
    ${actor}    Remote Actor Without API Key
    Run Cleveractors    validate    ${actor}
    Command Should Fail With Exit Code    1
    Error Output Should List Problems
    ...    agent.api_key_env: environment variable 'CLEVERACTORS_TEST_UNSET_KEY' is not set (provider 'openai' needs an API key; any value works for a server that ignores it)

Validate Lists Every Problem Of A Config At Once, One Per Line
    ${actor}    Actor With Five Problems
    Run Cleveractors    validate    ${actor}
    Command Should Fail With Exit Code    1
    Error Output Should Be The Problems Of    ${actor}    INVALID:    @{FIVE PROBLEMS}

Run With A Bad Config Lists Its Problems One Per Line, As Validate Does
    ${actor}    Actor With Five Problems
    Run Actor    ${actor}    ${MESSAGE}
    Command Should Fail With Exit Code    1
    Error Output Should Be The Problems Of    ${actor}    error:    @{FIVE PROBLEMS}

Serve And Run With A Base URL List Every Problem At Once, As Validate Does
    [Documentation]    The command line's overrides (--store, --base-url) are put in before the
    ...    config is checked, so these commands check it in one pass too.
    ${actor}    Openai Actor With A Bad Field And An Unimportable Handler
    ${actor_dir}    Evaluate    str(pathlib.Path($actor).parent)    modules=pathlib
    @{problems}    Create List
    ...    agent.temperature: Input should be a valid number, unable to parse string as a number (got 'hot')
    ...    agent.tools.0: tool 'get_weather': handler 'nowhere.weather:get_weather' cannot be imported: ModuleNotFoundError: No module named 'nowhere'; looked for nowhere.py or nowhere/ beside the actor config in ${actor_dir}, then on sys.path; put the module beside the actor config, or make it importable (pip install your package, or set PYTHONPATH)
    Run Cleveractors    validate    ${actor}
    Error Output Should Be The Problems Of    ${actor}    INVALID:    @{problems}
    Run Cleveractors    serve    ${actor}    --store    sqlite:///unused.db
    Command Should Fail With Exit Code    1
    Error Output Should Be The Problems Of    ${actor}    error:    @{problems}
    Run Actor    ${actor}    ${MESSAGE}    --base-url    http://127.0.0.1:9/v1
    Command Should Fail With Exit Code    1
    Error Output Should Be The Problems Of    ${actor}    error:    @{problems}

Run With A Missing Actor File Fails With One Line
    Run Actor    no-such-actor.yaml    ${MESSAGE}
    Command Should Fail With Exit Code    1
    Error Output Should Be    no-such-actor.yaml: cannot read actor config (No such file or directory)

Provider Error Fails With One Line And Shows The Usage Spent
    ${actor}    Actor Whose Model Fails After A Tool Round
    Run Actor    ${actor}    ${MESSAGE}
    Command Should Fail With Exit Code    1
    Error Output Should Be    ModelAPIError: boom
    Output Should Show Tool Call    get_weather    city=Oslo
    ${spent}    Scripted Tokens Before Failure    ${actor}
    Usage Table Total Should Be    ${spent}    stream=stderr

Cut-Off Stream Fails With One Line And Marks The Usage Estimated
    ${actor}    Actor Whose Answer Is Cut Off
    Run Actor    ${actor}    ${MESSAGE}
    Command Should Fail With Exit Code    1
    Error Output Should Be    ModelConnectionError: stream cut off after 3 chunks
    Usage Table Should Mark Estimated    stream=stderr

Provider Error With JSON Prints The Failed Result
    ${actor}    Actor Whose Model Fails After A Tool Round
    Run Actor    ${actor}    ${MESSAGE}    --json
    Command Should Fail With Exit Code    1
    Error Output Should Be    ModelAPIError: boom
    ${result}    Output Should Be An Execution Result
    Should Be Equal    ${result.error.message}    boom
    ${spent}    Scripted Tokens Before Failure    ${actor}
    Should Be Equal As Integers    ${result.total_tokens}    ${spent}

Ctrl-C Cancels The Run And Shows The Usage Spent
    ${actor}    Actor With A Long Running Tool
    Interrupt Actor Run When A Tool Starts    ${actor}    ${MESSAGE}
    Command Should Fail With Exit Code    130
    Error Output Should Be    interrupted; the run was cancelled
    Output Should Show Line    tool wait(delay=60) cancelled
    ${spent}    Scripted Tokens Before Failure    ${actor}
    Usage Table Total Should Be    ${spent}    stream=stderr

Base URL Is Refused For An Offline Actor
    ${demo}    Demo Actor
    Run Actor    ${demo}    ${MESSAGE}    --base-url    http://127.0.0.1:9/v1
    Command Should Fail With Exit Code    1
    Error Output Should Be
    ...    --base-url: actor 'weather-assistant' uses provider 'stub'; a base URL applies to provider 'openai' only

Events Cannot Be Combined With JSON
    ${demo}    Demo Actor
    Run Actor    ${demo}    ${MESSAGE}    --events    --json
    Command Should Fail With Exit Code    2
    Error Output Should Be    --events cannot be combined with --json or --no-stream

Version Is The Installed Package's
    Run Cleveractors    --version
    Command Should Succeed
    ${version}    Evaluate    importlib.metadata.version("cleveractors")    modules=importlib.metadata
    Output Should Be    cleveractors ${version}

Without The CLI Extra The Command Says What To Install
    Run Cleveractors Without Module    typer    --version
    Command Should Fail With Exit Code    2
    Error Output Should Be    the command line needs 'typer': pip install 'cleveractors[cli]'

Serve Without The Web Extra Says What To Install
    ${demo}    Demo Actor
    Run Cleveractors Without Module    uvicorn    serve    ${demo}
    Command Should Fail With Exit Code    2
    Error Output Should Be    serve needs 'uvicorn': pip install 'cleveractors[web]'

Serve Runs The Chat App For The Actor
    ${demo}    Demo Actor
    ${url}    Start Serving Actor    ${demo}
    Chat Page Should Name Actor    ${url}    weather-assistant
    Stop Serving
    Served Output Should Show    Serving weather-assistant on ${url} (Ctrl-C stops)
    Served Output Should Show    no store: sessions are not kept
    [Teardown]    Stop Serving

Serve Refuses A Broken Actor, Listing Its Problems One Per Line
    ${actor}    Actor With Unimportable Handlers
    ${actor_dir}    Folder Of    ${actor}
    ${demo_module}    Module File Of    cleveractors.demo
    Run Cleveractors    serve    ${actor}
    Command Should Fail With Exit Code    1
    Error Output Should Be The Problems Of    ${actor}    error:
    ...    agent.tools.0: tool 'get_weather': handler 'nowhere.weather:get_weather' cannot be imported: ModuleNotFoundError: No module named 'nowhere'; looked for nowhere.py or nowhere/ beside the actor config in ${actor_dir}, then on sys.path; put the module beside the actor config, or make it importable (pip install your package, or set PYTHONPATH)
    ...    agent.tools.1: tool 'convert': handler 'cleveractors.demo:no_such_function' cannot be imported: module 'cleveractors.demo' (${demo_module}) has no 'no_such_function'

The Getting-Started Snippet Runs Against The Demo Actor, Calling It Three Times
    [Documentation]    The stub script replays from its first reply for every run: execute(),
    ...    execute_stream() and execute_events() on one executor all get the whole answer.
    ${demo}    Demo Actor
    Run Docs Snippet    getting-started.md    Run an actor    ${demo}
    Command Should Succeed
    ${answer}    Scripted Answer Of    ${demo}
    Output Should Contain Times    ${answer}    2
    Output Should Contain Times    run_finished    1
    Output Should Show A Line Matching    \\d+

Serve On The Demo Actor Answers 20 Requests In A Row
    ${demo}    Demo Actor Without Delays
    ${url}    Start Serving Actor    ${demo}
    ${answer}    Scripted Answer Of    ${demo}
    Served Actor Should Answer Requests In A Row    ${url}    20    ${answer}
    [Teardown]    Stop Serving

A Handler Beside The YAML Validates And Runs From Another Folder
    ${actor}    Actor With A Handler Module Beside It
    ${elsewhere}    Another Folder
    Run Cleveractors In Folder    ${elsewhere}    validate    ${actor}
    Command Should Succeed
    Output Should Show Line    OK: calculator (1 tool)
    Run Cleveractors In Folder    ${elsewhere}    run    ${actor}    What is 2 + 3?    --no-stream
    Command Should Succeed
    Output Should Show Finished Tool Call    add    a=${2}    b=${3}
    Output Should Show Answer    2 + 3 is 5.

Options Are Checked With One-Line Errors And Exit Code 2
    [Template]    Option Should Be Refused
    run    actor.yaml    ${SPACE}    MESSAGE is empty: say something to the actor
    run    actor.yaml    Hi    --base-url    notaurl    --base-url must be an http:// or https:// URL, got 'notaurl'
    run    actor.yaml    Hi    --base-url    ftp://example.org    --base-url must be an http:// or https:// URL, got 'ftp://example.org'
    serve    actor.yaml    --port    99999    --port must be between 1 and 65535, got 99999
    serve    actor.yaml    --port    0    --port must be between 1 and 65535, got 0

An Empty Message Exits 2 Without A Usage Table
    ${demo}    Demo Actor
    Run Actor    ${demo}    ${EMPTY}
    Command Should Fail With Exit Code    2
    Error Output Should Be    MESSAGE is empty: say something to the actor
    Output Should Not Show    Token usage
    Error Output Should Not Contain    Token usage

Serve On A Busy Port Is A One-Line Error
    ${demo}    Demo Actor
    ${port}    Hold A Busy Port
    Run Cleveractors    serve    ${demo}    --host    127.0.0.1    --port    ${port}
    Command Should Fail With Exit Code    1
    Error Output Should Be    cannot listen on 127.0.0.1:${port}: Address already in use
    [Teardown]    Release Busy Ports

A Connection Error Names The URL It Tried, Never The Key
    ${url}    Closed Local URL
    ${actor}    OpenAI Actor With Base URL    ${url}
    Run Actor    ${actor}    ${MESSAGE}
    Command Should Fail With Exit Code    1
    Error Output Should Be    OpenAIConnectionError: Connection error. (while talking to ${url})
    Error Output Should Not Contain    test-key

A Connection Error Names The URL Without Its Credentials
    ${url}    Closed Local URL
    ${host_and_path}    Evaluate    $url.removeprefix("http://")
    ${actor}    OpenAI Actor With Base URL    http://bob:url-secret@${host_and_path}?key=url-secret
    Run Actor    ${actor}    ${MESSAGE}
    Command Should Fail With Exit Code    1
    Error Output Should Be
    ...    OpenAIConnectionError: Connection error. (while talking to http://***@${host_and_path}?key=***)
    Error Output Should Not Contain    url-secret

In A Terminal A Failed Tool Call Is One Line, Without A Log Line
    ${actor}    Actor With A Failing Tool
    Run Actor In A Terminal    ${actor}    ${MESSAGE}
    Command Should Succeed
    Output Should Have One Line Per Failed Call    get_weather
    Output Should Show Answer    I could not look it up.

With Verbose The Library's Log Lines Are Shown Too
    ${actor}    Actor With A Failing Tool
    Run Actor    ${actor}    ${MESSAGE}    --verbose
    Command Should Succeed
    Error Output Should Contain    WARNING cleveractors.

A Relative Store Path Is Beside The Actor File, From Whatever Folder A Command Runs
    ${actor}    Actor With A Store Beside It    retention_days=30
    ${folder}    Folder Of    ${actor}
    ${database}    Set Variable    ${folder}${/}shop.db
    ${elsewhere}    Another Folder
    Run Cleveractors In Folder    ${elsewhere}    run    ${actor}    Hello    --session    s-1
    Command Should Succeed
    File Should Exist    ${database}
    ${url}    Start Serving Actor    ${actor}    folder=${elsewhere}
    Stop Serving
    Served Output Should Show    store: sqlite:///${database}
    ${other}    Another Folder
    Run Cleveractors In Folder    ${other}    usage    ${actor}    --session    s-1
    Command Should Succeed
    Output Should Show Line    total 1 call 10 3 13
    Age Stored Sessions    ${database}    31
    Run Cleveractors In Folder    ${other}    store    prune    ${actor}    --dry-run
    Command Should Succeed
    Output Should Be    would remove 1 session untouched for more than 30 days:\n${SPACE * 2}s-1
    Run Cleveractors In Folder    ${other}    store    prune    ${actor}
    Output Should Be    removed 1 session untouched for more than 30 days
    Run Cleveractors In Folder    ${other}    store    prune    ${actor}    --dry-run
    Output Should Be    would remove 0 sessions untouched for more than 30 days
    Directory Should Be Empty    ${elsewhere}
    Directory Should Be Empty    ${other}
    [Teardown]    Stop Serving

Usage And Store Prune Never Create A Database: A Missing One Is An Error Naming It
    ${actor}    Actor With A Store Beside It    retention_days=30
    ${folder}    Folder Of    ${actor}
    ${database}    Set Variable    ${folder}${/}shop.db
    ${elsewhere}    Another Folder
    FOR    ${command}    IN    usage    store prune --dry-run    store prune
        Run Cleveractors In Folder    ${elsewhere}    @{command.split()}    ${actor}
        Command Should Fail With Exit Code    1
        Error Output Should Be    no store database at ${database} (nothing was created)
    END
    # A path typed on the command line is from the working folder, like any path typed there.
    Run Cleveractors In Folder    ${elsewhere}    usage    ${actor}    --store    sqlite:///typo.db
    Command Should Fail With Exit Code    1
    Error Output Should Be    no store database at ${elsewhere}${/}typo.db (nothing was created)
    File Should Not Exist    ${database}
    Directory Should Be Empty    ${elsewhere}

Store Prune Without Retention Days Has Nothing To Prune
    ${actor}    Actor With A Store Beside It
    Run Actor    ${actor}    Hello    --session    s-1
    Command Should Succeed
    FOR    ${options}    IN    ${EMPTY}    --dry-run
        Run Cleveractors    store    prune    ${actor}    @{options.split()}
        Command Should Succeed
        Output Should Be
        ...    nothing to prune: the actor's store keeps sessions forever (set store.retention_days to remove idle ones)
    END

Every Command's Help Names Its Values Plainly
    FOR    ${command}    IN    run    chat    validate    serve    usage    store prune    store    ${EMPTY}
        Run Cleveractors    @{command.split()}    --help
        Command Should Succeed
        Help Should Use Plain Metavars
    END
    Run Cleveractors    usage    --help
    Output Should Show Line    Usage: cleveractors usage [OPTIONS] ACTOR
    Output Should Show Line    --session ID Only this session's calls.
    Run Cleveractors    serve    --help
    Output Should Show Line    --insecure-no-auth Serve a non-loopback address without API keys
No Stream Shows The Text Before Its Tool Calls And A Failed Call With Its Error
    ${actor}    Actor With Text Before A Failing Tool
    Run Actor    ${actor}    ${MESSAGE}    --no-stream
    Command Should Succeed
    Output Lines Should Start In Order
    ...    Let me look that up.
    ...    tool get_weather({"city": ) started
    ...    tool get_weather({"city": ) failed in
    ...    I could not look it up.
    Output Should Show A Line Matching
    ...    tool get_weather\\(\\{"city": \\) failed in \\d+\\.\\d\\ds: tool 'get_weather' \\(call \\w+\\) arguments are not valid JSON .*

With Verbose In A Terminal Log Lines Never Split The Streamed Text
    ${actor}    Actor With Text Before A Failing Tool
    Run Actor In A Terminal    ${actor}    ${MESSAGE}    --verbose
    Command Should Succeed
    Output Should Show Line    Let me look that up.
    Log Lines Should Stand On Their Own    WARNING
    Log Lines Should Stand On Their Own    INFO
    Output Should Show A Line Matching
    ...    WARNING cleveractors.agents.tool: agent cli-test, run run_[0-9a-f]{24}: tool 'get_weather' \\(call \\w+\\) arguments are not valid JSON .*

A Library Script Without Logging Configured Prints Nothing Of Ours
    ${actor}    Actor With A Failing Tool
    Run Library Script Without Logging    ${actor}
    Command Should Succeed
    Output Should Be    I could not look it up.
    Error Output Should Be Empty

Serve Logs Each Line With Its Time And Level
    ${demo}    Demo Actor Without Delays
    ${url}    Start Serving Actor    ${demo}
    ${answer}    Scripted Answer Of    ${demo}
    Served Actor Should Answer Requests In A Row    ${url}    1    ${answer}
    Stop Serving
    Served Output Should Have A Line Matching
    ...    ^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d,\\d{3} INFO: +cleveractors\\.executor: run run_\\w+ started
    Served Output Should Have A Line Matching
    ...    ^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d,\\d{3} INFO: +Application startup complete\\.$
    [Teardown]    Stop Serving

Chat Keeps The Conversation, Shows Usage, Starts Afresh And Survives Ctrl-C
    [Documentation]    The stub counts the words of each request as its prompt tokens: a turn
    ...    that reads the earlier ones reads more than the first did.
    ${demo}    Demo Actor
    Start Chat In A Terminal    ${demo}
    Type In Chat    ${MESSAGE}
    ${answer}    Scripted Answer Of    ${demo}
    Chat Should Show    ${answer}
    Chat Should Show    chat so far
    Chat Should Show    in 1 turn
    Chat Should Prompt Again
    Type In Chat    ${MESSAGE}
    Chat Should Show    ${answer}
    Chat Should Show    in 2 turns
    Chat Should Prompt Again
    Type In Chat    /usage
    ${shown}    Chat Should Prompt Again
    ${table}    Chat Usage Table Should Have Calls    ${shown}    4
    Prompt Tokens Of Call Should Be    ${table}    3    greater than    1
    Type In Chat    /new
    Chat Should Show    a fresh conversation
    Chat Should Prompt Again
    Type In Chat    ${MESSAGE}
    Chat Should Show    tool get_weather(city="Paris") started
    Press Ctrl-C In Chat
    Chat Should Show    tool get_weather(city="Paris") cancelled
    Chat Should Show    stopped; this turn is not kept, the chat goes on
    Chat Should Prompt Again
    Type In Chat    ${MESSAGE}
    Chat Should Show    ${answer}
    Chat Should Show    in 4 turns
    Chat Should Prompt Again
    Type In Chat    /usage
    ${shown}    Chat Should Prompt Again
    ${table}    Chat Usage Table Should Have Calls    ${shown}    7
    Prompt Tokens Of Call Should Be    ${table}    6    equal to    1
    Type In Chat    /exit
    Chat Should Exit With Code    0
    [Teardown]    Stop Chat

Chat With A Session Keeps The Conversation In The Store
    ${actor}    Demo Actor With A Store
    Start Chat In A Terminal    ${actor}    --session    s-chat
    Type In Chat    ${MESSAGE}
    Chat Should Show    in 1 turn
    Chat Should Prompt Again
    Type In Chat    ${MESSAGE}
    Chat Should Show    in 2 turns
    Chat Should Prompt Again
    Type In Chat    /usage
    ${shown}    Chat Should Prompt Again
    ${table}    Chat Usage Table Should Have Calls    ${shown}    4
    Prompt Tokens Of Call Should Be    ${table}    3    greater than    1
    Type In Chat    /exit
    Chat Should Exit With Code    0
    Run Cleveractors    usage    ${actor}    --session    s-chat
    Command Should Succeed
    Output Should Show A Line Matching    \\s*total\\s+4 calls\\s.*
    [Teardown]    Stop Chat

Ctrl-C At The Chat Prompt Leaves The Chat
    ${demo}    Demo Actor Without Delays
    Start Chat In A Terminal    ${demo}
    Press Ctrl-C In Chat
    Chat Should Exit With Code    0
    [Teardown]    Stop Chat

Help Reads Cleanly In A Terminal
    Run Cleveractors In A Terminal    run    --help
    Command Should Succeed
    Output Should Show Line    Usage: cleveractors run [OPTIONS] ACTOR MESSAGE
    Output Should Show Line    --base-url URL Send an openai actor's requests to this server.
    Output Should Not Show    <bool>
    Output Should Not Show    {actor}
    Run Cleveractors In A Terminal    serve    --help
    Output Should Show Line    Usage: cleveractors serve [OPTIONS] ACTOR
    Output Should Not Show    <bool>
    Run Cleveractors In A Terminal    --help
    Output Should Show Line    --version Show the version and exit.
    Output Should Not Show    <bool>


*** Keywords ***
Option Should Be Refused
    [Arguments]    @{arguments_and_error}
    ${arguments}    Get Slice From List    ${arguments_and_error}    0    -1
    Run Cleveractors    @{arguments}
    Command Should Fail With Exit Code    2
    Error Output Should Be    ${arguments_and_error}[-1]
