"""REST endpoints of the releases app, one module per feature."""
