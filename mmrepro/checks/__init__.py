"""Checks that compare runs and return results (the command-line tools print them)."""
