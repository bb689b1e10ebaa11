"""The live class, an optional feature: its stores, rules, rounds, push and the session's part."""
