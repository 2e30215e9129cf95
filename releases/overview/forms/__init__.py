"""Forms of the overview pages."""
