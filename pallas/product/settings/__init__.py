"""The settings registry: every behaviour knob described once (docs/console.md)."""
