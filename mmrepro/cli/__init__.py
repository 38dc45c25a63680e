"""Logic behind the scripts in ``tools/`` (the scripts stay thin)."""
