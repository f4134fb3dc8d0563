"""The conversation core: what happens to a message that needs no model (ingress, the stage
list, silence). docs/architecture.md draws it."""
