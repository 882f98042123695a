"""``python -m pau_mcp`` is the ``pau-mcp`` command."""

from .cli import main

main()
