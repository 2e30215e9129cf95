"""Sign-in with the company's identity provider: OpenID Connect through mozilla-django-oidc.

`discovery` reads the provider's configuration once, `backends` turns a verified ID token
into a ledger account (roles and teams from its groups, `ledger.services.accounts`), and
`views` are the sign-in, callback, sign-out and refusal pages (docs/operations.md).
"""
