"""Shapes of the releases app over REST, one module per feature."""
