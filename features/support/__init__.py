"""Test machinery of the Behave suite: fault injection and the billing property's harness."""
