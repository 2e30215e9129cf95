from django.contrib.auth.models import Group

from ledger.roles import Role
from tests.factories import PASSWORD


def test_anonymous_visitor_is_sent_to_login(client):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_login_page_renders_a_form_with_csrf(client):
    response = client.get("/accounts/login/")

    assert response.status_code == 200
    assert b"csrfmiddlewaretoken" in response.content
    assert b'name="username"' in response.content


def test_person_logs_in_and_sees_their_roles(client, owner):
    response = client.post(
        "/accounts/login/", {"username": owner.username, "password": PASSWORD}, follow=True
    )

    assert response.redirect_chain == [("/", 302)]
    assert "Model owner" in response.content.decode()
    assert response.context["user"] == owner


def test_wrong_password_is_refused_with_a_message(client, owner):
    response = client.post("/accounts/login/", {"username": owner.username, "password": "nope"})

    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_person_without_role_is_told_what_to_ask_for(client, outsider):
    client.force_login(outsider)

    response = client.get("/")

    assert "You hold no role yet" in response.content.decode()


def test_every_role_exists_as_a_group(db):
    names = set(Group.objects.values_list("name", flat=True))

    assert {role.value for role in Role} <= names


def test_logout_takes_a_post_not_a_get(client, owner):
    client.force_login(owner)

    assert client.get("/accounts/logout/").status_code == 405
    response = client.post("/accounts/logout/")

    assert response.status_code == 302
    assert "_auth_user_id" not in client.session


def test_pages_carry_the_csrf_token_for_htmx_and_load_vendored_scripts(client, owner):
    client.force_login(owner)

    page = client.get("/").content.decode()

    assert 'hx-headers=\'{"X-CSRFToken": "' in page
    assert "/static/vendor/htmx-2.0.11.min.js" in page
    assert "://" not in page.split("<body")[0], "the head loads nothing from another host"
