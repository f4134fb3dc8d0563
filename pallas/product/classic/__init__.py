"""Learned lines: the bot learns which replies follow which messages in each group and answers
in the group's own words, with no model (docs/classic.md)."""
