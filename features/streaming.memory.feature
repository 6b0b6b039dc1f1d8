Feature: A stream in flight holds its answer, not its chunks
  A streamed reply is folded as it arrives: neither the loop nor the LangChain path it drives
  keeps a list of the reply's chunks, so what a stream in flight holds grows with its answer's
  text and nothing more. Measured with tracemalloc while several streams are in flight: each
  model has sent its whole answer and waits before its closing (usage) chunk.

  Scenario Outline: Memory per in-flight stream stays flat beyond the answer as it grows to 100 KB
    Given streamed answers of <small> and of <large> in chunks of <chunk> characters
    When <streams> streams of each size are held in flight once their whole answer has arrived
    Then memory per stream grows with the answer by less than <bound> beyond the answer's own length
    And every stream then finishes with its whole answer and the model's usage

    Examples:
      | small | large  | chunk | streams | bound |
      | 1 KB  | 100 KB | 20    | 3       | 24 KB |
