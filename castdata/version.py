"""castdata's version (a leaf: the run and dataset manifests record it)."""

__version__ = "0.1.0"
