"""Importers: result files of other harnesses -> castdata run directories (`castdata import ...`)."""
