"""Models of the releases app arrive with their issue."""
