"""Models of the replay app arrive with their issue."""
