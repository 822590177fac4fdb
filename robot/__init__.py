"""robot package."""
