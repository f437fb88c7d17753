"""The package version (in the lowest layer, so every part can report it)."""

__version__ = "0.1.0"
