"""selfrag's lab: the measurements behind the reports in lab/results and docs/results.md.

Not part of the installed package, and nothing in ``src/selfrag`` imports it. Its
entry points run from the repository root as ``python -m lab.NAME`` (see
lab/README.md); they use only selfrag's public names, which
tests/test_lab_api.py checks.
"""
