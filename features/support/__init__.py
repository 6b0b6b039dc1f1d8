"""Test machinery of the Behave suite: fault injection and the billing property's harness;
chunks shaped like provider integrations and chat models streaming them (the fold property)."""
