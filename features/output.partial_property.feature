@property
Feature: A typed answer streams as partial objects that only grow, the last the blocking output (property-based)
  Hypothesis draws a JSON object (nested objects and lists of strings, numbers, booleans and
  null) and cuts the model's answer at random places: the answer's text in native mode, the
  output tool's streamed arguments in tool mode. Every partial object the run streams
  (`output_delta`) must extend the one before (keys and items kept, a string only longer, no
  number cut short), and the last must be the validated object: equal to the answer, and to
  `result.output` of the same turn run blocking. `nox -s property_tests` runs many more examples.

  Scenario: Partial objects only grow, and the last is the blocking output, however the answer is cut
    When the partial output property is checked on CLEVERACTORS_PROPERTY_EXAMPLES examples (default 150)
    Then the partial output property holds for every example
    And the partial output property was checked on at least 50 examples of each mode
    And at least 20 examples streamed 3 partial objects or more
