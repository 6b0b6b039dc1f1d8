*** Settings ***
Documentation       OpenTelemetry over a real wire: `cleveractors serve` and `cleveractors run`
...                 export OTLP/HTTP to a receiver on 127.0.0.1 that this suite starts (decoding the
...                 protobuf payloads as a collector does). What the spans say is checked against
...                 the scripted model's bill and the store's ledger.
Library             OperatingSystem
Library             TracingLibrary.py
Suite Setup         Start Receiver And Model
Suite Teardown      Stop Tracing Servers
Test Tags           tracing


*** Variables ***
${SERVICE}              cleveractors-robot
${STUB ACTOR}           ${CURDIR}/actors/stub_two_rounds.yaml


*** Test Cases ***
A Served Run's Spans Equal The Bill And The Ledger, And Its Request Is Their Parent
    [Documentation]    Two `/chat` runs (one whose client hangs up mid-answer) and two
    ...    `/v1/chat/completions` runs (blocking and streamed), one after the other; then SIGTERM,
    ...    which must flush the batched spans before the process ends.
    ${folder}=    Set Variable    ${OUTPUT DIR}${/}traced-serve
    Create Directory    ${folder}
    ${actor}=    Write Traced Actor    ${folder}${/}actor.yaml    ${MODEL}
    ${server}=    Start Traced Server    ${actor}    ${RECEIVER}    ${SERVICE}
    ${last}=    Chat To The End    ${server}    What is the weather in Lisbon?
    Should Be Equal    ${last}    run_finished
    ${tokens}=    Complete With OpenAI API    ${server}    And in Porto?
    Should Be True    ${tokens} > 0
    Chat And Hang Up Mid Answer    ${server}    And in Faro, briefly?
    ${tokens}=    Complete With OpenAI API    ${server}    And in Braga?    stream=${True}
    Should Be True    ${tokens} > 0
    Wait Until Every Call Is Billed And Recorded    ${actor}
    ${status}=    Terminate Traced Server
    Should Be Equal As Integers    ${status}    -15    the server did not end by its SIGTERM
    Every Span Should Have Ended Once
    Every Run Should Be A Child Of Its HTTP Server Span    ${SERVICE}
    Chat Spans Should Equal The Bill And The Ledger    ${actor}
    The Hung Up Run Should End In Error
    Token Metrics Should Equal The Ledger    ${actor}

The Run Command Exports Its Run As One Trace
    ${ran}=    Run Command With Environment    run    ${STUB ACTOR}    Weather in Paris and Rome?
    ...    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=${RECEIVER}/v1/traces    OTEL_SERVICE_NAME=cli-run
    ...    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf
    ...    OTEL_RESOURCE_ATTRIBUTES=deployment.environment=robot
    Should Be Equal As Integers    ${ran.returncode}    0    ${ran.stderr}
    Wait For Spans Named    invoke_agent stub-weather-two-rounds    1
    Run Spans Should Be A Tree    cli-run    calls=3

The Console Exporter Writes Spans To Stderr, Leaving The JSON Result Alone
    ${ran}=    Run Command With Environment    run    ${STUB ACTOR}    Weather?    --json
    ...    OTEL_TRACES_EXPORTER=console    OTEL_METRICS_EXPORTER=console
    Should Be Equal As Integers    ${ran.returncode}    0    ${ran.stderr}
    ${result}=    Evaluate    json.loads($ran.stdout)    modules=json
    Should Be Equal As Integers    ${result}[llm_calls]    3
    Should Contain    ${ran.stderr}    "name": "invoke_agent stub-weather-two-rounds"
    Should Contain    ${ran.stderr}    "name": "gen_ai.client.token.usage"
    Should Contain    ${ran.stderr}    "service.name": "cleveractors"

Without The Otel Extra An Export Asked For Fails Naming The Extra
    ${hidden}=    Directory Hiding The Sdk    ${OUTPUT DIR}${/}no-otel-sdk
    ${ran}=    Run Command With Environment    run    ${STUB ACTOR}    Weather?
    ...    OTEL_EXPORTER_OTLP_ENDPOINT=${RECEIVER}    PYTHONPATH=${hidden}:%{PYTHONPATH=}
    Should Be Equal As Integers    ${ran.returncode}    2
    Should Be Equal    ${ran.stderr.strip()}
    ...    error: OTEL_EXPORTER_OTLP_ENDPOINT asks for OpenTelemetry export, which needs 'opentelemetry.sdk': pip install 'cleveractors[otel]'
    Should Be Empty    ${ran.stdout}

An Exporter Or Protocol That Is Not Shipped Is Refused Before Anything Runs
    ${ran}=    Run Command With Environment    run    ${STUB ACTOR}    Weather?
    ...    OTEL_TRACES_EXPORTER=zipkin
    Should Be Equal As Integers    ${ran.returncode}    2
    Should Be Equal    ${ran.stderr.strip()}
    ...    error: OTEL_TRACES_EXPORTER='zipkin': cleveractors exports traces with 'otlp' (OTLP over HTTP), 'console' or 'none', not zipkin
    ${ran}=    Run Command With Environment    run    ${STUB ACTOR}    Weather?
    ...    OTEL_EXPORTER_OTLP_ENDPOINT=${RECEIVER}    OTEL_EXPORTER_OTLP_PROTOCOL=grpc
    Should Be Equal As Integers    ${ran.returncode}    2
    Should Contain    ${ran.stderr}    OTEL_EXPORTER_OTLP_PROTOCOL='grpc': cleveractors sends OTLP over HTTP only

OTEL_SDK_DISABLED Turns Every Export Off
    ${ran}=    Run Command With Environment    run    ${STUB ACTOR}    Weather?
    ...    OTEL_SDK_DISABLED=true    OTEL_TRACES_EXPORTER=console
    Should Be Equal As Integers    ${ran.returncode}    0    ${ran.stderr}
    Should Not Contain    ${ran.stderr}    invoke_agent


*** Keywords ***
Start Receiver And Model
    ${receiver}=    Start OTLP Receiver
    Set Suite Variable    ${RECEIVER}    ${receiver}
    ${model}=    Start Scripted Model
    Set Suite Variable    ${MODEL}    ${model}
