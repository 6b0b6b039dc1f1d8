*** Settings ***
Documentation       Integration suites of cleveractors: the executor, the real wire, the CLI and
...                 the web app. Run them all with
...                 `robot --pythonpath robot/libraries --pythonpath features --outputdir reports/robot robot`
...                 (the libraries consume runs through the test tree's `support.harness`).
...
...                 This file only tags and describes: each suite imports its own libraries and
...                 sets up (and tears down) what it needs.
Test Tags           integration
Suite Setup         Log Test Environment


*** Keywords ***
Log Test Environment
    [Documentation]    Writes the versions under test to the log, to read a failure in CI.
    ${python}=    Evaluate    sys.version    modules=sys
    ${version}=    Evaluate    importlib.metadata.version("cleveractors")    modules=importlib.metadata
    Log    cleveractors ${version} on Python ${python}
