"""The suites that ship with pau-mcp (data only: one directory per suite).

Installed as the package ``pau_mcp._suites`` (see pyproject.toml), so an installed
pau-mcp finds them through ``importlib.resources`` wherever it lives; this file only
makes the directory a regular package, which editable installs need to map it.
"""
