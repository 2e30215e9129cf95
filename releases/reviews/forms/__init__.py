"""Forms of the reviews room."""
