"""What readers see: figures, Table 1 and its writers, what chapters display, the grade
explorer, the book, and ``filter-results``/``ids``/``export`` for results produced elsewhere."""
