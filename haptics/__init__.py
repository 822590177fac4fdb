"""haptics package."""
