"""Make the client environments the interop tests drive from outside this project's environment.

A set-up step, not a test (no test installs packages): `python tests/interop/client_venvs.py`, which .ci/run runs.
Each environment is made once per requirement set and Python, under ``PAU_TEST_VENVS`` (default: the user cache
directory); a made one is kept.
"""

from __future__ import annotations

import sys

from interop_support import CLIENT_VENVS, make_client_venv


def main() -> int:
    for name, requirements in CLIENT_VENVS.items():
        try:
            python = make_client_venv(name, requirements)
        except RuntimeError as exc:
            print(f"client environment {name}: {exc}", file=sys.stderr)
            return 1
        print(f"client environment {name}: {python}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
