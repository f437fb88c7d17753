"""The ``selfrag`` command line."""
