"""Domain-agnostic math: confusion counts, rates, curves, rank statistics and AP."""
