"""Pages of the overview room."""
