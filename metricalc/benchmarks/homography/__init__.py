"""The Glue Factory homography estimation (records of experiment runs).

The room of this benchmark (docs/architecture.md, "One benchmark, one room").
"""
