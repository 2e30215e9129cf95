"""Pages of the governance room."""
