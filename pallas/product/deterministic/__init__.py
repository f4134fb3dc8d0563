"""Deterministic plugins: repeat, poke back, welcome / farewell. No model is involved.

Each module holds a pure decision over facts read from the timeline, with time passed in;
the NoneBot glue in packages/ gathers the facts, sends, and records what was sent.
"""
