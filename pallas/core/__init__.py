"""Pure domain types. Imports nothing else from this project."""
