"""CLI sub-commands of `rmc`, one module each (see rmc.cli)."""
