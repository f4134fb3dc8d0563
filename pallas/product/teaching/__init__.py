"""The teaching guard: what may be taught to the bot about people (no slander, no vulgarity),
shared by the features that learn from what people say (memory, persona's notes and voice)."""
