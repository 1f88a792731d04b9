"""The results database: SQLite experiments, results and per-scene rows; exports; imports."""
