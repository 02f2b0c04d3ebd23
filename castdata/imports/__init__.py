"""Importers: other tools' result files as castdata trajectory records (`castdata import ...`)."""
