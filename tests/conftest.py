"""Shared pytest set-up: the host package puts the firmware's portable core on sys.path."""

import rmc  # noqa: F401  (side effect: firmware/ on sys.path, `micropython` shim on CPython)
