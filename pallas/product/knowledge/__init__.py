"""A knowledge folder the bot answers from (docs/knowledge.md)."""
