"""Pages of the reviews room."""
