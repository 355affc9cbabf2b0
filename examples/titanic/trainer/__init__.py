"""Titanic survival trainer: a Vertex AI style PyTorch training package."""
