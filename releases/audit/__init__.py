"""Audit: the records an auditor reads (one registry, `records.py`), the change
record of a release, exports and their bundles, and outbound webhooks. It reads
governance and reviews; neither imports it."""
