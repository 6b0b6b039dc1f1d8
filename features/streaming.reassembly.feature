@streaming
Feature: Streamed tool calls are put back together from their fragments
  A streamed reply carries its tool calls as fragments: the first of a call usually has its
  index, id and name, the rest only the index and a piece of the arguments. They are grouped
  by index, then by call id, never by tool name, and come out in the order the calls began.
  Fragments are written `index:id:name:arguments`, separated by " ; "; an assembled call is
  `id name {arguments}`, or `id name !raw` when its arguments are not a JSON object.

  Scenario Outline: Reassembly: <case>
    Given the tool-call fragments <fragments>
    When the fragments are assembled
    Then the assembled calls are <calls>

    Examples:
      | case                                                   | fragments                                                                                  | calls                                                              |
      | fragments are joined per call                          | 0:c1:get_weather:{"ci ; 0:::ty": ; 0:::"Paris"}                                            | c1 get_weather {"city": "Paris"}                                   |
      | two calls are kept apart                               | 0:c1:get_weather:{"city": ; 1:c2:get_time:{"city": ; 0:::"Paris"} ; 1:::"Rome"}             | c1 get_weather {"city": "Paris"} ; c2 get_time {"city": "Rome"}    |
      | two calls of the same tool are kept apart              | 0:c1:get_weather:{"city": ; 1:c2:get_weather:{"city": ; 1:::"Rome"} ; 0:::"Paris"}          | c1 get_weather {"city": "Paris"} ; c2 get_weather {"city": "Rome"} |
      | an id repeated on every fragment does not reopen a call | 0:c1:get_weather:{"city": ; 0:c1::"Paris"}                                                | c1 get_weather {"city": "Paris"}                                   |
      | an id repeated on fragments without an index           | :c1:get_weather:{"city": ; :c1::"Paris"} ; :c1::                                            | c1 get_weather {"city": "Paris"}                                   |
      | a name arriving after its id                           | 0:c1::{"city": ; 0::get_weather:"Paris"}                                                   | c1 get_weather {"city": "Paris"}                                   |
      | a first fragment with no id                            | 0::get_weather:{"city": ; 0:c1::"Paris"}                                                   | c1 get_weather {"city": "Paris"}                                   |
      | a call that never gets an id                           | 0::get_weather:{"city": "Paris"}                                                           | call_unnamed_0 get_weather {"city": "Paris"}                       |
      | a call with no arguments                               | 0:c1:get_time:                                                                             | c1 get_time {}                                                     |
      | order preserved: calls come out in the order they began | 1:c2:get_time:{"city": ; 0:c1:get_weather:{"city": ; 0:::"Paris"} ; 1:::"Rome"}           | c2 get_time {"city": "Rome"} ; c1 get_weather {"city": "Paris"}    |
      | an empty stream                                        | (none)                                                                                     | (none)                                                             |
      | arguments that never become valid JSON                 | 0:c1:get_weather:{"city": ; 0:::"Par                                                       | c1 get_weather !{"city":"Par                                       |
      | arguments that are JSON but not an object              | 0:c1:get_weather:["Paris"]                                                                 | c1 get_weather !["Paris"]                                          |
      | a server reusing index 0 for every call                | 0:c1:get_weather:{"city": "Paris"} ; 0:c2:get_weather:{"city": "Rome"}                     | c1 get_weather {"city": "Paris"} ; c2 get_weather {"city": "Rome"} |
      | fragments with neither index nor id continue the call  | :c1:get_weather:{"city": ; :::"Paris"}                                                     | c1 get_weather {"city": "Paris"}                                   |

  Scenario: A streamed reply folds into the message that adding its chunks gives
    Given a streamed reply whose text, tool-call fragments and usage arrive over several chunks
    When the chunks are folded
    Then the folded message is what adding the chunks with + gives

  Scenario: Arguments that never become valid JSON reach the model as a tool error, and the loop goes on
    Given the actor declares the demo tool get_weather
    And the actor's model replies:
      | text                              | tool calls                                                       | args chunk |
      |                                   | get_weather#w1 {"city": "Paris"} ; get_weather#w2 {"city": "Ro  | 3          |
      | Paris is rainy; Rome I can't say. |                                                                  |            |
    When the actor is asked "Weather in Paris and Rome?" in streaming mode
    Then the answer is "Paris is rainy; Rome I can't say."
    And the handlers ran in this order:
      | tool        | arguments         |
      | get_weather | {"city": "Paris"} |
    And the model's request 2 answers the calls w1 and w2 with one tool message each, in that order
    And the model's request 2 carries an error for call w2 mentioning "arguments are not valid JSON"
    And the tool call w2 is recorded as an error
