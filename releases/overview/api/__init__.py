"""The overview room's API: what looks across rooms (the incident screen in one call)."""
