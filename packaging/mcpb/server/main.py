"""The bundle's entry point: ``pau-mcp serve`` over stdio, as the host launches it (``uv run server/main.py``)."""

import sys

from pau_mcp.cli import main

if __name__ == "__main__":
    main(["serve", *sys.argv[1:]], prog_name="pau-mcp")
