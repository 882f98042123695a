"""pau-mcp: hidden Python functions as black-box MCP tools, with a scorer and an evaluation harness."""

__version__ = "0.1.0"

__all__ = ["__version__"]
