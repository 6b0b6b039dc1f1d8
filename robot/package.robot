*** Settings ***
Documentation       The wheel holds everything the package needs: built as pip builds it, installed
...                 into a fresh virtualenv (where `cleveractors` can only come from the wheel),
...                 its command runs an actor and `serve` serves the chat page with its static
...                 files. By default the virtualenv sees only the dependencies the wheel declares
...                 for `cli` and `web` (linked from the environment running the suite), so an
...                 undeclared one fails here as it would for a user; `nox -s build`
...                 (`--variable WHEEL_DEPENDENCIES:installed`) has pip resolve and install them
...                 from the package index instead.
Library             PackageLibrary.py
Suite Teardown      Stop Serving
Test Tags           package
Test Timeout        5 minutes    # `nox -s build` installs every dependency


*** Test Cases ***
The Wheel Holds Every File Of The Package
    Build The Wheel
    Wheel Should Hold Every File Of The Package

The Installed Command Runs An Actor From The Wheel
    Install The Wheel In A Fresh Virtualenv
    Package Should Be Imported From The Fresh Virtualenv
    ${actor}    Stub Actor File
    ${answer}    Run The Installed Command    run    ${actor}    Weather in Paris?    --no-stream
    Command Should Have Succeeded
    Should Contain    ${answer}    Light rain in Paris.

The Installed Serve Answers The Chat Page And Its Static Files
    ${actor}    Stub Actor File
    ${url}    Serve From The Fresh Virtualenv    ${actor}
    Chat Page And Its Files Should Be Served    ${url}
