Feature: Tool handlers beside the actor's YAML import from any working directory
  A handler module next to the actor config (`mytools.py`, or a package folder `mytools/`, with
  or without `__init__.py`) is
  imported from that folder first, whatever the working directory, without putting the folder
  on sys.path for other code. A handler that cannot be imported says where it was looked for
  and how to fix it.

  Scenario: A module file beside the YAML is imported from another working directory
    Given a folder holding the file "mytools.py":
      """
      def add(a: int, b: int) -> int:
          "Add two numbers."
          return a + b
      """
    And in that folder the actor config "actor.yaml":
      """
      name: calculator
      agent:
        provider: stub
        tools:
          - {name: add, handler: "mytools:add"}
        script:
          - tool_calls: [{name: add, args: {a: 2, b: 3}}]
          - text: It is 5.
      """
    When the actor is loaded from that config while the working directory is elsewhere
    And the loaded actor is asked "What is 2 + 3?"
    Then the tool add returned "5"
    And the folder of the config is not on sys.path
    And a plain "import mytools" still fails

  Scenario: A package beside the YAML is imported, with its relative imports
    Given a folder holding the file "mytools/__init__.py":
      """
      """
    And in that folder the file "mytools/maths.py":
      """
      from ._numbers import double

      def twice(n: int) -> int:
          "Double a number."
          return double(n)
      """
    And in that folder the file "mytools/_numbers.py":
      """
      def double(n: int) -> int:
          return 2 * n
      """
    And in that folder the actor config "actor.yaml":
      """
      name: calculator
      agent:
        provider: stub
        tools:
          - {name: twice, handler: "mytools.maths:twice"}
        script:
          - tool_calls: [{name: twice, args: {n: 21}}]
          - text: It is 42.
      """
    When the actor is loaded from that config while the working directory is elsewhere
    And the loaded actor is asked "Twice 21?"
    Then the tool twice returned "42"

  Scenario: A folder without __init__.py beside the YAML is a namespace package
    Given a folder holding the file "myactor/shoptools.py":
      """
      from .prices import price

      def quote(item: str) -> str:
          "The price of an item."
          return f"{item}: {price(item)} EUR"
      """
    And in that folder the file "myactor/prices.py":
      """
      def price(item: str) -> int:
          return len(item)
      """
    And in that folder the actor config "actor.yaml":
      """
      name: shop
      agent:
        provider: stub
        tools:
          - {name: quote, handler: "myactor.shoptools:quote"}
        script:
          - tool_calls: [{name: quote, args: {item: apple}}]
          - text: Five euros.
      """
    When the actor is loaded from that config while the working directory is elsewhere
    And the loaded actor is asked "How much is an apple?"
    Then the tool quote returned "apple: 5 EUR"
    And the folder of the config is not on sys.path
    And a plain "import myactor" still fails

  Scenario: A module missing from a folder without __init__.py beside the YAML says where it looked
    Given a folder holding the file "myactor/prices.py":
      """
      def price(item: str) -> int:
          return len(item)
      """
    And in that folder the actor config "actor.yaml":
      """
      name: shop
      agent:
        provider: stub
        tools:
          - {name: quote, handler: "myactor.shoptools:quote"}
        script: [{text: Hi.}]
      """
    When the actor is loaded from that config while the working directory is elsewhere
    Then loading fails with a ConfigurationError saying "handler 'myactor.shoptools:quote' cannot be imported: ModuleNotFoundError: No module named 'myactor.shoptools' in ; myactor ; beside the actor config (a package without __init__.py): the module must be a file in it"

  Scenario: A module beside the YAML that fails to import names its file
    Given a folder holding the file "mytools.py":
      """
      import no_such_dependency
      """
    And in that folder the actor config "actor.yaml":
      """
      name: calculator
      agent:
        provider: stub
        tools:
          - {name: add, handler: "mytools:add"}
        script: [{text: Hi.}]
      """
    When the actor is loaded from that config while the working directory is elsewhere
    Then loading fails with a ConfigurationError saying "handler 'mytools:add' cannot be imported: ModuleNotFoundError: No module named 'no_such_dependency' ; mytools.py (beside the actor config); fix the error in that file"

  Scenario: A handler found nowhere says where it was looked for and how to fix it
    Given a folder holding the actor config "actor.yaml":
      """
      name: calculator
      agent:
        provider: stub
        tools:
          - {name: add, handler: "mytools:add"}
        script: [{text: Hi.}]
      """
    When the actor is loaded from that config while the working directory is elsewhere
    Then loading fails with a ConfigurationError saying "No module named 'mytools' ; looked for mytools.py or mytools/ beside the actor config in ; then on sys.path ; put the module beside the actor config, or make it importable"

  Scenario: A handler module that lacks the function names its file
    Given a folder holding the file "mytools.py":
      """
      def subtract(a: int, b: int) -> int:
          return a - b
      """
    And in that folder the actor config "actor.yaml":
      """
      name: calculator
      agent:
        provider: stub
        tools:
          - {name: add, handler: "mytools:add"}
        script: [{text: Hi.}]
      """
    When the actor is loaded from that config while the working directory is elsewhere
    Then loading fails with a ConfigurationError saying "handler 'mytools:add' cannot be imported: module 'mytools' ; mytools.py) has no 'add'"

  Scenario Outline: A handler module on sys.path that <problem> is refused as "cannot be imported", without a traceback
    Given regression: the module "<module>" in a folder on sys.path holds this code:
      """
      <code>
      """
    And an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        script: [{text: Hello.}]
        tools:
          - name: lookup
            handler: "<module>:lookup"
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "agent.tools.0 ; <module>:lookup ; cannot be imported"
    And the error shows no traceback from inside the libraries it uses
    And regression: the error message holds no traceback

    Examples:
      | problem                   | module                          | code                                      |
      | raises at import time     | regression_needs_database_url   | raise RuntimeError("needs DATABASE_URL")  |
      | has a syntax error        | regression_handler_syntax_error | def lookup(query:                         |
