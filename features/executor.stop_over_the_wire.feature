@cancellation
Feature: A stop ends the run over the real wire, whatever the provider's client does
  A consumer can stop a streamed run at any event: by breaking out, calling aclose(), leaving
  `async with`, cancelling its own task, or from inside an anyio cancel scope that is cancelled
  (as Starlette does when a client hangs up). Over the real wire (langchain-openai's ChatOpenAI
  against a scripted OpenAI-compatible server), the stop ends the run even where the client
  swallows the cancellation (Python 3.11's asyncio.wait_for, around every chunk read): the
  result is cancelled, no tool starts after the stop, the stop returns promptly, and every
  request the server received is in the bill. Waiting for a run that is slow to stop costs no
  CPU, and a consumer that reads slowly holds the run back instead of letting events pile up.

  Scenario Outline: A stop at the <position> by <how> ends the run
    Given a scripted OpenAI server whose first reply streams a sentence at full speed and calls slow_lookup twice, and whose second reply streams slowly
    When the consumer stops at the <position> by <how>
    Then the result is marked cancelled
    And no tool started after the stop
    And the stop returned within 0.5 seconds
    And every request the server received is in the bill, as billed where its usage arrived
    And no task is left running

    Examples:
      | position       | how                            |
      | first text     | break                          |
      | first text     | aclose()                       |
      | first text     | leaving async with             |
      | first text     | cancelling the consumer's task |
      | first text     | an anyio cancel scope          |
      | mid-text       | break                          |
      | mid-text       | aclose()                       |
      | mid-text       | leaving async with             |
      | mid-text       | cancelling the consumer's task |
      | mid-text       | an anyio cancel scope          |
      | usage recorded | break                          |
      | usage recorded | aclose()                       |
      | usage recorded | leaving async with             |
      | usage recorded | cancelling the consumer's task |
      | usage recorded | an anyio cancel scope          |
      | tool requested | break                          |
      | tool requested | aclose()                       |
      | tool requested | leaving async with             |
      | tool requested | cancelling the consumer's task |
      | tool requested | an anyio cancel scope          |
      | tool started   | break                          |
      | tool started   | aclose()                       |
      | tool started   | leaving async with             |
      | tool started   | cancelling the consumer's task |
      | tool started   | an anyio cancel scope          |
      | tool finished  | break                          |
      | tool finished  | aclose()                       |
      | tool finished  | leaving async with             |
      | tool finished  | cancelling the consumer's task |
      | tool finished  | an anyio cancel scope          |

  Scenario: Waiting for a tool that takes 5 s to stop costs almost no CPU, under a cancel scope
    Given a scripted OpenAI server whose reply calls slow_lookup taking 5 s to stop
    When an anyio cancel scope around the consumer is cancelled while the tool runs
    Then the result is marked cancelled
    And the stop waited for the tool to let go
    And the process spent less than 0.2 s of CPU from the first event to the settled run
    And no task is left running

  Scenario: A consumer that reads slowly holds the run back from the provider
    Given a scripted OpenAI server whose reply is a long answer of 3000 words
    When the consumer reads one event, then nothing for a while, then the rest
    Then while it read nothing the model took no more than the channel holds from the provider
    And the whole answer arrived and the run is billed as the server billed it

  Scenario: A run whose sink another agent wraps is held back by a slow consumer all the same
    Given a scripted OpenAI server whose reply is a long answer of 3000 words
    When the consumer of an agent that wraps its run's sink reads one event, then nothing for a while, then the rest
    Then while it read nothing the model took no more than the channel holds from the provider
    And the whole answer arrived and the run is billed as the server billed it
