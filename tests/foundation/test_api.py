import re

from rest_framework.authtoken.models import Token


def test_anonymous_api_call_is_refused_with_401(client):
    response = client.get("/api/me/")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_token_authenticates_and_names_the_roles(client, sre):
    token = Token.objects.create(user=sre)

    response = client.get("/api/me/", HTTP_AUTHORIZATION=f"Token {token.key}")

    assert response.status_code == 200
    assert response.json()["username"] == sre.username
    assert response.json()["roles"] == ["platform_sre"]


def test_an_unknown_token_is_refused(client, db):
    response = client.get("/api/me/", HTTP_AUTHORIZATION="Token 0123456789abcdef")

    assert response.status_code == 401
    assert "Invalid token" in response.json()["detail"]


def test_openapi_schema_describes_the_api_for_authenticated_callers(client, auditor):
    assert client.get("/api/schema/").status_code == 401
    client.force_login(auditor)

    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")

    assert response.status_code == 200
    schema = response.json()
    assert schema["info"]["title"] == "Inference Release Ledger API"
    assert "/api/me/" in schema["paths"]
    assert "tokenAuth" in schema["components"]["securitySchemes"]


def test_api_documentation_page_uses_no_cdn(client, auditor):
    client.force_login(auditor)

    response = client.get("/api/docs/")

    page = response.content.decode()
    assert response.status_code == 200
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in page
    # Every script and stylesheet comes from this site (a nonce is random: "…cdn…" in
    # one is no CDN).
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources and all(not source.startswith(("http:", "https:", "//")) for source in sources)
    assert "cdn" not in re.sub(r'nonce="[^"]*"', "", page).lower()
