*** Settings ***
Documentation       Handoffs over the real wire: `ChatOpenAI` (provider `openai`) against a scripted
...                 OpenAI-compatible server on 127.0.0.1, two actor files with different system
...                 prompts and tools. After the first actor's model calls `transfer_to_billing`,
...                 the next request carries billing's system prompt and tools, and the
...                 conversation so far; every call is billed as the server billed it, per agent.
Library             HandoffsLibrary
Test Tags           wire    handoffs
Test Timeout        30 seconds
Test Teardown       Stop Handoff Servers


*** Test Cases ***
The Request After A Handoff Carries The Target's System Prompt And Tools
    [Template]    Billing Should Take Over Over The Wire
    blocking
    streaming


*** Keywords ***
Billing Should Take Over Over The Wire
    [Arguments]    ${mode}
    Load Handoff Actors Over The Wire    handoff_triage.yaml    handoff_billing.yaml
    ${answer}=    Send Message To The Handoff Actors    I want a refund for order 42.    mode=${mode}
    Should Be Equal    ${answer}    Billing here. Your refund for order 42 is on its way.
    Request Should Carry The Prompt And Tools Of    1    handoff_triage.yaml    transfer_to_billing
    Request Should Carry The Prompt And Tools Of    2    handoff_billing.yaml
    ...    get_weather    transfer_to_triage
    Request Should Hold The Conversation So Far    2    system    user    assistant    tool
    The Answer Should Come From    billing
    Reported Tokens Per Agent Should Equal What The Server Billed
    IF    "${mode}" == "streaming"
        The Events Should Include The Handoff    triage    billing
    END
