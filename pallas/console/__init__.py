"""The console: HTTP API and web console under /pallas/."""
