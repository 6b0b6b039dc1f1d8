Feature: The architecture page's layer table is what the imports do
  docs/architecture.md draws the library as layers in a table, top row the highest. The table is
  data: every module of src/cleveractors is named by a row (a folder row names every module in
  the folder), a module imports only from its own layer and the layers below it (imports inside
  functions and under `if TYPE_CHECKING:` count), and no modules import each other in a circle.
  A problem names the module, the import's file and line, and the layers, so the page or the
  code can be fixed where it drifted.

  Scenario: Every module of the library keeps to the layer table
    Given the layer table of docs/architecture.md
    When the imports of every module under src/cleveractors are checked against it
    Then there is no problem

  Scenario: The check names an import from a higher layer, hidden in a function or not
    Given a package "shop" in a temporary folder with these modules:
      | module          | source                                                     |
      | __init__.py     |                                                            |
      | web/__init__.py |                                                            |
      | web/routes.py   | from shop import orders                                    |
      | orders.py       | from shop.money import Price                               |
      | money.py        | def total():\n    from shop.web.routes import app          |
      | ledger.py       | from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from shop import orders |
    And the layer table:
      """
      | Layer | Modules | What lives there |
      | --- | --- | --- |
      | clients | `web/`, `__init__.py` | the routes |
      | core | `orders.py` | orders |
      | foundation | `money.py`, `ledger.py` | prices and the ledger |
      """
    When the imports of every module of that package are checked against it
    Then the problems are exactly:
      | problem                                                                                                                            |
      | shop.ledger (layer 'foundation') imports shop.orders (layer 'core', higher) at ledger.py:3 (TYPE_CHECKING)                         |
      | shop.money (layer 'foundation') imports shop.web.routes (layer 'clients', higher) at money.py:2 (function-local)                    |
      | import circle between shop.money, shop.orders, shop.web.routes; one loop: shop.money -> shop.web.routes (money.py:2, function-local), shop.web.routes -> shop.orders (web/routes.py:1, top level), shop.orders -> shop.money (orders.py:1, top level) |

  Scenario: The check names a circle inside one layer, a module no row names and a row's name that is no module
    Given a package "shop" in a temporary folder with these modules:
      | module          | source                                          |
      | __init__.py     |                                                 |
      | web/__init__.py |                                                 |
      | web/routes.py   | from .frontends import page                     |
      | web/frontends.py| def page():\n    from . import routes           |
      | cart.py         |                                                 |
    And the layer table:
      """
      | Layer | Modules | What lives there |
      | --- | --- | --- |
      | clients | `web/`, `__init__.py`, `cli.py` | the routes and the command line |
      """
    When the imports of every module of that package are checked against it
    Then the problems are exactly:
      | problem                                                                                                                                                              |
      | shop.cart (cart.py) is in no layer of the table: add it to a row                                                                                                     |
      | the table's layer 'clients' names `cli.py`, which is no module of shop (moved or removed?)                                                                           |
      | import circle between shop.web.frontends, shop.web.routes; one loop: shop.web.frontends -> shop.web.routes (web/frontends.py:2, function-local), shop.web.routes -> shop.web.frontends (web/routes.py:1, top level) |
