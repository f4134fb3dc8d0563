"""Owners and admins steer the bot from the chat (docs/commands.md)."""
