"""castdata: build, publish and train on critique datasets for tool-calling agents (CAST)."""

__version__ = "0.1.0"
