"""Memory: what the bot keeps about people and groups, and how it is written and recalled."""
