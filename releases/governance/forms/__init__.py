"""Forms of the governance room."""
