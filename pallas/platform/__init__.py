"""Platform boundary: translation between chat platforms and the core's standard shapes."""
