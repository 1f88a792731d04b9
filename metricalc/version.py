"""The installed version of metricalc (``metricalc.__version__``), importable from any layer."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("metricalc")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
