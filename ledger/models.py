"""Registry models arrive with the Registry issue."""
