*** Settings ***
Documentation       An agent called as a tool over the real wire: the parent and the child are
...                 each `ChatOpenAI` against a scripted OpenAI-compatible server; the ledger
...                 rows of the run tree sum to the parent's totals, which are what the two
...                 servers billed, whether the turn is blocking, streamed or stopped while the
...                 child streams.
Library             DelegationLibrary
Test Tags           wire    delegation
Test Timeout        30 seconds
Suite Teardown      Stop The Servers Of The Run Tree


*** Test Cases ***
The Ledger Rows Of A Run Tree Sum To The Parent's Totals, Blocking And Streamed
    Start A Parent And A Child Over The Wire
    Ask The Parent    What is the weather in Paris?    mode=blocking
    The Parent Should Have    answered
    The Ledger Rows Of The Run Tree Should Sum To The Parent Totals
    The Parent Totals Should Be What Both Servers Billed
    Ask The Parent    What is the weather in Paris?    mode=streamed
    The Parent Should Have    answered
    The Ledger Rows Of The Run Tree Should Sum To The Parent Totals
    The Parent Totals Should Be What Both Servers Billed

Stopping The Parent While The Child Streams Cancels Both, And The Ledger Still Adds Up
    [Tags]    cancellation
    Start A Parent And A Child Over The Wire    child_token_interval_s=0.05
    Ask The Parent And Stop It While The Child Streams    What is the weather in Paris?
    The Parent Should Have    cancelled
    The Child Calls Should Be Billed With One Cut Off
    The Ledger Rows Of The Run Tree Should Sum To The Parent Totals

A Child Over Its Budget Answers By Synthesis And The Parent Finishes
    Start A Parent And A Child Over The Wire    child_token_budget=5
    Ask The Parent    What is the weather in Paris?
    The Parent Should Have    answered
    The Child Should Have Answered By Synthesis For    budget
    The Ledger Rows Of The Run Tree Should Sum To The Parent Totals
