*** Settings ***
Documentation       The chat page in headless Chromium: `cleveractors serve` on 127.0.0.1, a message
...                 typed and sent, the answer rendered as it streams, tool cards going from running
...                 to done, and the turn's usage. A screenshot is saved in the output directory.
Library             SeleniumLibrary    timeout=20s    run_on_failure=Capture Page Screenshot
Library             WebLibrary.py
Suite Setup         Start Chat Page Server
Suite Teardown      Close Browser And Servers


*** Variables ***
${ACTOR}            ${CURDIR}/actors/web_chat_page.yaml
${KEYED ACTOR}      ${CURDIR}/actors/web_weather.yaml


*** Test Cases ***
The Chat Page Streams A Tool-Using Answer With Tool Cards And Usage
    ${turn}=    Scripted Turn    ${ACTOR}
    Open Chat Page In Chromium    ${URL}
    Element Text Should Be    id:actor-name    web-chat-page
    Input Text    id:message    What's the weather in Paris, and when does the Louvre open?
    Click Button    id:send
    Wait Until Page Contains Element    css:.tool-card.running[data-call-id="call_hours"]
    Capture Page Screenshot    ${OUTPUT DIR}/chat-page-tool-running.png
    Answer Should Stream In
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    ${rounds' texts}=    Evaluate    "\\n\\n".join($turn["texts"])
    Element Text Should Be    id:answer    ${rounds' texts}
    Page Should Contain Element    css:.tool-card.done    limit=2
    Element Should Contain    css:.tool-card[data-call-id="call_weather"] .tool-name    get_weather
    Element Should Contain    css:.tool-card[data-call-id="call_hours"] .tool-status    done ·
    Element Attribute Value Should Be    id:usage    data-prompt-tokens    ${turn}[prompt_tokens]
    Element Attribute Value Should Be    id:usage    data-completion-tokens    ${turn}[completion_tokens]
    Element Attribute Value Should Be    id:usage    data-total-tokens    ${turn}[total_tokens]
    Element Attribute Value Should Be    id:usage    data-estimated    false
    Element Should Contain    id:usage    ${turn}[total_tokens] total
    Element Attribute Value Should Be    css:#usage .cost    data-cost-usd    0.0011325
    Element Should Contain    id:usage    $0.00113
    Capture Page Screenshot    ${OUTPUT DIR}/chat-page.png


The Chat Page Asks For The API Key Once, When The Server Wants One
    Go To    ${KEYED URL}
    Input Text    id:message    What's the weather in Paris?
    Click Button    id:send
    Alert Should Be Present    This server needs an API key:    action=LEAVE
    Input Text Into Alert    k-browser    action=ACCEPT
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    ${kept}=    Execute Javascript    return sessionStorage.getItem("cleveractors-api-key")
    Should Be Equal    ${kept}    k-browser
    Input Text    id:message    And in Rome?
    Click Button    id:send
    Element Text Should Be    css:#current-turn .question    And in Rome?
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    Alert Should Not Be Present    timeout=0.5s


*** Keywords ***
Start Chat Page Server
    ${url}=    Start Actor Server    ${ACTOR}
    Set Suite Variable    ${URL}    ${url}
    ${keyed url}=    Start Actor Server    ${KEYED ACTOR}    api_keys=k-browser
    Set Suite Variable    ${KEYED URL}    ${keyed url}

Close Browser And Servers
    Close All Browsers
    Remove Browser Profiles
    Stop Servers
