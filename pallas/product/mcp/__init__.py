"""Tools from MCP servers (docs/mcp.md)."""
