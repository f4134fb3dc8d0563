"""Product logic: what the bot does with what it hears."""
