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
    Element Attribute Value Should Be    id:answer    data-markdown    ${rounds' texts}
    Page Should Contain Element    css:#answer .round-text > p    limit=2
    Element Text Should Be    css:#answer .round:last-child .round-text > p:last-child    ${turn}[answer]
    Preamble Should Be Drawn Above Its Tool Cards    ${turn}[texts][0]
    Page Should Contain Element    css:.tool-card.done    limit=2
    Element Should Contain    css:.tool-card[data-call-id="call_weather"] .tool-name    get_weather
    Element Text Should Be    css:.tool-card[data-call-id="call_hours"] .tool-status    done
    Element Should Contain    css:.tool-card[data-call-id="call_hours"] .tool-duration    s
    Element Attribute Value Should Be    id:usage    data-prompt-tokens    ${turn}[prompt_tokens]
    Element Attribute Value Should Be    id:usage    data-completion-tokens    ${turn}[completion_tokens]
    Element Attribute Value Should Be    id:usage    data-total-tokens    ${turn}[total_tokens]
    Element Attribute Value Should Be    id:usage    data-estimated    false
    Element Should Contain    id:usage    ${turn}[total_tokens] total
    Element Attribute Value Should Be    css:#usage .cost    data-cost-usd    0.0011325
    Element Should Contain    id:usage    $0.00113
    Capture Page Screenshot    ${OUTPUT DIR}/chat-page.png


A Reloaded Session Is Drawn Exactly As It Was Live
    [Documentation]    With a store, the page keeps its session: after a reload each stored turn
    ...    shows the same Markdown, the text before the tool calls, the tool cards with their
    ...    status and the token line as the live page did (only the tools' durations, which a
    ...    stored turn does not keep, are left out of the comparison).
    Open Chat Page In Chromium    ${STORED URL}
    Input Text    id:message    What's the weather in Paris, and when does the Louvre open?
    Click Button    id:send
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    Page Should Contain Element    css:#answer .round-text > p    limit=3
    Page Should Contain Element    css:#answer li    limit=2
    Page Should Contain Element    css:#current-turn .tool-card.done[data-call-id="call_weather"]
    Page Should Contain Element    css:#current-turn .tool-card.failed[data-call-id="call_hours"]
    Page Should Contain Element    css:#usage .cost
    ${live}=    Rendered Turn
    Reload Page
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    Page Should Contain Element    css:.turn    limit=1
    ${reloaded}=    Rendered Turn
    FOR    ${part}    IN    question    answer    tools    notice    error    usage
        Should Be Equal    ${reloaded}[${part}]    ${live}[${part}]
        ...    msg=the turn's ${part} is drawn differently after a reload
    END
    Preamble Should Be Drawn Above Its Tool Cards    I'll check the weather and the museum's opening hours.
    Capture Page Screenshot    ${OUTPUT DIR}/chat-page-reloaded.png

A Typed Answer Is A Key/Value Card, Updated As It Streams And Drawn Again After A Reload
    [Documentation]    A typed actor's object (`output_schema`) is a card under the answer:
    ...    drawn from each `output_delta` as the object grows, the validated one at the end,
    ...    and the same card again from the stored turn after a reload.
    Open Chat Page In Chromium    ${TYPED URL}
    Wait Until Page Contains Element    css:#transcript[aria-busy="false"]
    Watch The Output Cards
    Input Text    id:message    What's the weather in Paris today?
    Click Button    id:send
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    ${seen}=    Execute Javascript    return window.outputsSeen
    Should Be True    len($seen) >= 3    the card was drawn ${{len($seen)}} time(s), not as it grew
    ${final}=    Evaluate    json.loads($seen[-1])
    Should Be Equal    ${final}[city]    Paris
    Should Be Equal    ${final}[hours][3][hour]    ${18}
    Should Be True    $seen[-1] not in $seen[:-1]    the whole object was there before it streamed
    Element Text Should Be    css:#output dt[data-key="city"] + dd    Paris
    Element Text Should Be    css:#output dt[data-key="rain"] + dd    true
    Page Should Contain Element    css:#output dd ol > li    limit=4
    Page Should Contain Element    css:#output.final
    Element Should Not Be Visible    css:#answer .round:last-child .round-text
    ...    message=the object's JSON is shown beside its card
    ${live}=    Get Element Attribute    css:#current-turn .reply    outerHTML
    Capture Page Screenshot    ${OUTPUT DIR}/chat-page-typed.png
    Reload Page
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    ${reloaded}=    Get Element Attribute    css:#current-turn .reply    outerHTML
    Should Be Equal    ${reloaded}    ${live}    the card is drawn differently after a reload

A Typed List Is Drawn As The List Itself, Live And After A Reload
    [Documentation]    A typed answer that is no object (here a list) comes from the model
    ...    under the key "response": the card shows the value itself, the stored turn's too.
    ${url}=    Start Actor Server    ${CURDIR}/actors/web_typed_list.yaml
    ...    --store    sqlite:///${OUTPUT DIR}/browser-typed-list-sessions.db
    Open Chat Page In Chromium    ${url}
    Wait Until Page Contains Element    css:#transcript[aria-busy="false"]
    Input Text    id:message    What should I take?
    Click Button    id:send
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    Element Attribute Value Should Be    id:output    data-output
    ...    ["an umbrella","a light coat","shoes for the rain"]
    Element Text Should Be    css:#output > ol > li:nth-child(3)    shoes for the rain
    ${live}=    Get Element Attribute    css:#current-turn .reply    outerHTML
    Reload Page
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    ${reloaded}=    Get Element Attribute    css:#current-turn .reply    outerHTML
    Should Be Equal    ${reloaded}    ${live}    the card is drawn differently after a reload

A Fresh Chat Page Asks The Server For Nothing That Is Not There
    [Documentation]    A page that never sent a message has no session to show: loading it makes
    ...    no request that fails (no 404 for a session nobody started), nor does a reload once
    ...    it has one.
    ${url}=    Start Actor Server    ${CURDIR}/actors/web_reload.yaml
    ...    --store    sqlite:///${OUTPUT DIR}/browser-fresh-sessions.db
    Open Chat Page In Chromium    ${url}
    Wait Until Page Contains Element    css:#transcript[aria-busy="false"]
    Input Text    id:message    What's the weather in Paris?
    Click Button    id:send
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    Page Should Have Made No Failed Request
    Reload Page
    Wait Until Page Contains Element    css:#transcript[aria-busy="false"]
    Page Should Contain Element    css:.turn    limit=1
    Page Should Have Made No Failed Request

The Chat Page Renders Markdown, And Never Runs HTML From The Model
    Open Chat Page In Chromium    ${MARKDOWN URL}
    Input Text    id:message    Plan my day in Paris
    Click Button    id:send
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    Element Text Should Be    css:#answer strong    the plan
    Page Should Contain Element    css:#answer li    limit=2
    Element Text Should Be    css:#answer li code    9:00
    Page Should Not Contain Element    css:#answer script
    Page Should Not Contain Element    css:#answer [onerror]
    Page Should Not Contain Element    css:#answer img    message=an image in model output would load a URL the model chose
    ${pwned}=    Execute Javascript    return window.pwned === undefined ? null : window.pwned
    Should Be Equal    ${pwned}    ${None}    msg=HTML from the model ran in the page
    Capture Page Screenshot    ${OUTPUT DIR}/chat-page-markdown.png

The Chat Page Has A Favicon And Its Own Copies Of Its Scripts
    Open Chat Page In Chromium    ${MARKDOWN URL}
    Page Should Contain Element    css:link[rel="icon"][href="static/favicon.svg"]
    ${icon}=    Get From Server    ${MARKDOWN URL}/favicon.ico
    Should Be Equal    ${icon}[status]    ${200}
    Should Be Equal    ${icon}[content_type]    image/svg+xml
    FOR    ${script}    IN    static/vendor/marked.umd.js    static/vendor/purify.min.js
        ${served}=    Get From Server    ${MARKDOWN URL}/${script}
        Should Be Equal    ${served}[status]    ${200}
        Should Start With    ${served}[content_type]    text/javascript
    END
    ${outside}=    Get From Server    ${MARKDOWN URL}/static/index.html
    Should Be Equal    ${outside}[status]    ${404}
    ${page sources}=    Execute Javascript
    ...    return [...document.scripts].map(s => s.src).filter(Boolean).concat([...document.querySelectorAll('link[href]')].map(l => l.href))
    FOR    ${source}    IN    @{page sources}
        Should Start With    ${source}    ${MARKDOWN URL}/    msg=the page loads ${source} from elsewhere
    END

The Chat Page Asks For The API Key Once, When The Server Wants One
    Go To    ${KEYED URL}
    # On a busy machine the page may still be coming in when the keyword returns.
    Wait Until Page Contains Element    id:message
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

The Empty Chat Page Says What To Do Until The First Message
    Open Chat Page In Chromium    ${URL}
    Element Should Be Visible    id:empty-hint
    Element Should Contain    id:empty-hint    answers stream in, tools show as cards
    Input Text    id:message    What's the weather in Paris?
    Click Button    id:send
    Wait Until Element Is Not Visible    id:empty-hint


*** Keywords ***
Preamble Should Be Drawn Above Its Tool Cards
    [Documentation]    The current turn's first round shows PREAMBLE, then that round's tool
    ...    cards, and the answer comes below them.
    [Arguments]    ${preamble}
    Element Text Should Be    css:#answer .round:first-child .round-text    ${preamble}
    Page Should Contain Element    css:#answer .round:first-child .tool-card    limit=2
    ${text}=    Get Vertical Position    css:#answer .round:first-child .round-text
    ${cards}=    Get Vertical Position    css:#answer .round:first-child .tools
    ${answer}=    Get Vertical Position    css:#answer .round:last-child .round-text
    Should Be True    ${text} < ${cards} < ${answer}    the preamble, its tool cards, then the answer

Watch The Output Cards
    [Documentation]    From now on, `window.outputsSeen` lists each object the page's output
    ...    card showed (its `data-output`), in order.
    Execute Javascript
    ...    window.outputsSeen = [];
    ...    new MutationObserver(() => {
    ...        const shown = document.querySelector("#current-turn .output")?.dataset.output;
    ...        if (shown !== undefined && shown !== window.outputsSeen.at(-1)) window.outputsSeen.push(shown);
    ...    }).observe(document.getElementById("transcript"), {subtree: true, childList: true, attributes: true});

Page Should Have Made No Failed Request
    ${failed}=    Execute Javascript
    ...    return performance.getEntriesByType("resource").filter((entry) => entry.responseStatus >= 400).map((entry) => entry.responseStatus + " " + entry.name)
    Should Be Empty    ${failed}    the page made requests that failed

Start Chat Page Server
    ${url}=    Start Actor Server    ${ACTOR}
    Set Suite Variable    ${URL}    ${url}
    ${markdown url}=    Start Actor Server    ${CURDIR}/actors/web_markdown.yaml
    Set Suite Variable    ${MARKDOWN URL}    ${markdown url}
    ${stored url}=    Start Actor Server    ${CURDIR}/actors/web_reload.yaml
    ...    --store    sqlite:///${OUTPUT DIR}/browser-sessions.db
    Set Suite Variable    ${STORED URL}    ${stored url}
    ${typed url}=    Start Actor Server    ${CURDIR}/actors/web_typed.yaml
    ...    --store    sqlite:///${OUTPUT DIR}/browser-typed-sessions.db
    Set Suite Variable    ${TYPED URL}    ${typed url}
    ${keyed url}=    Start Actor Server    ${KEYED ACTOR}    api_keys=k-browser
    Set Suite Variable    ${KEYED URL}    ${keyed url}

Close Browser And Servers
    Close All Browsers
    Remove Browser Profiles
    Stop Servers
