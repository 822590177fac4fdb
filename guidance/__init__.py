"""guidance package."""
