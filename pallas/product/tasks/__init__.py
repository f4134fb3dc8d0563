"""Tasks: reminders for everyone (docs/tasks.md)."""
