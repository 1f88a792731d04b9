"""The benchmarks, one folder (room) each: its loader, generator, pipeline, statistic and CLI verbs.

Each room sits above the shared layers (core, cube, metrics, keypoints, retrieval, datasets, stats,
plotting, commands, store, experiment, report) and imports only from them or from another room;
docs/architecture.md draws the picture.
"""
