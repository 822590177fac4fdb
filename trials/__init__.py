"""trials package."""
