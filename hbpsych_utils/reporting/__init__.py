"""What readers see: figures, Table 1 and its writers, the grade explorer, and
``filter-results`` for results produced elsewhere (notebooks 12-13, the CLI)."""
