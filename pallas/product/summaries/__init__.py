"""Summaries of a chat: on request, for a latecomer, and as a daily digest (docs/summaries.md)."""
