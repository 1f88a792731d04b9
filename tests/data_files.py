"""Where the real third-party files the tests read live: ``tests/data/`` (see its README).

Tests never read outside the repository: CI and a user's clone have nothing beside it.
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
HPATCHES_RETRIEVAL = DATA / "hpatches-eccv2016-retrieval"
"""The HPatches ECCV 2016 patch retrieval release: ``.benchmark`` and ``.labels`` files."""
