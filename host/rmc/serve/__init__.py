"""The table service: `rmc serve`."""
