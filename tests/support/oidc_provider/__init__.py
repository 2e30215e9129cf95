"""A real OpenID Connect provider for the sign-in tests: a small Django project running
django-oauth-toolkit's OIDC provider (code flow, PKCE required, RS256 ID tokens, RP-initiated
logout) on loopback, its own SQLite database in a temporary folder.

Started once per test session by `tests.support.oidc.oidc_provider`; people, groups and the
ledger's client are made with its management command (`provider`).
"""
