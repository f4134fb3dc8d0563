"""Media: pictures, stickers and voice, kept in the asset store (docs/media.md)."""
