Feature: /v1/chat/completions answers a response_format with a validated object
  A request's `response_format` (`json_object`, or `json_schema` strict or not) types that run:
  the openai SDK's `chat.completions.parse(response_format=Model)` returns the parsed object,
  blocking and streamed. A schema the endpoint cannot honour is a 400 in OpenAI's format naming
  the field.

  Scenario Outline: The openai SDK's parse() returns the object, <how>, after one retry
    Given a typed web app whose stub actor replies
      | reply                             |
      | {"name": "Paris"}                 |
      | {"name": "Paris", "temp_c": 12}   |
    When the openai SDK parses the typed web app's answer as City, <how>
    Then the typed web app's answer is City(name='Paris', temp_c=12)

    Examples:
      | how      |
      | blocking |
      | streamed |

  Scenario: json_object gives a JSON object as the content
    Given a typed web app whose stub actor replies
      | reply                     |
      | It is sunny.              |
      | {"sky": "sunny"}          |
    When the openai SDK asks the typed web app with the response_format {"type": "json_object"}
    Then the typed web app's answer is '{"sky": "sunny"}'

  Scenario: response_format text is an ordinary answer
    Given a typed web app whose stub actor replies
      | reply        |
      | It is sunny. |
    When the openai SDK asks the typed web app with the response_format {"type": "text"}
    Then the typed web app's answer is 'It is sunny.'

  Scenario Outline: A response_format the endpoint cannot honour is a 400 naming the field (<param>)
    Given a typed web app whose stub actor replies
      | reply |
      | {}    |
    When the openai SDK asks the typed web app with the response_format <response_format>
    Then the typed web app refused it with 400 naming the param "<param>"

    Examples:
      | response_format                                                               | param                              |
      | {"type": "xml"}                                                                | response_format.type               |
      | {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 3}}}  | response_format.json_schema.schema |
      | {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}        | response_format.json_schema.name   |
      | {"type": "json_schema"}                                                        | response_format.json_schema        |
      | {"type": "json_schema", "json_schema": {"name": "x", "schema": [1]}}           | response_format.json_schema.schema |

  Scenario: /chat streams a typed actor's output_delta events, the last the validated object
    Given a typed web app whose stub actor, typed by City, replies
      | reply                                                               |
      | {"name": "Paris", "temp_c": 12}                                     |
    When the typed web app's /chat is asked "Weather in Paris?"
    Then the typed /chat stream sent output_delta events, the last final with {"name": "Paris", "temp_c": 12}
