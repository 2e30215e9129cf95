"""Runtime pages and forms, through the client."""

from __future__ import annotations

import json

from ledger import services
from ledger.models import Event, Runtime
from tests.ledger.factories import RevisionFactory, RuntimeFactory, ServiceFactory, digest

PINNED = f"registry.example.com/vllm-openai:v0.6.3@{digest('image')}"
TAG_ONLY = "registry.example.com/vllm-openai:v0.6.3"


def runtime_data(team, **overrides):
    data = {
        "name": "vllm-0-6-3-h100x2",
        "team": team.pk,
        "engine": "vllm",
        "engine_version": "0.6.3",
        "image": PINNED,
        "launch_parameters": json.dumps({"max_model_len": 32768, "tensor_parallel_size": 2}),
        "gpu_model": "H100-80GB",
        "gpu_count": "2",
        "gpu_memory_gb": "80",
    }
    data.update(overrides)
    return data


def validate(client, data, field, url="/runtimes/new/validate"):
    return client.post(url, data, HTTP_HX_REQUEST="true", HTTP_HX_TRIGGER_NAME=field)


def test_runtime_list_filters_by_engine_and_counts_revisions(client, auditor, team):
    service = ServiceFactory(team=team)
    RevisionFactory(service=service, runtime=RuntimeFactory(team=team, name="vllm-a"))
    RuntimeFactory(team=team, name="sglang-a", engine="sglang", launch_parameters={})
    client.force_login(auditor)

    response = client.get("/runtimes/", {"engine": "vllm"})

    rows = list(response.context["page"].object_list)
    assert [r.name for r in rows] == ["vllm-a"]
    assert rows[0].revision_count == 1
    assert "No runtime matches" in client.get("/runtimes/", {"q": "zzz"}).content.decode()


def test_runtime_page_warns_about_an_unpinned_image_and_lists_parameters(client, sre, team):
    runtime = RuntimeFactory(
        team=team,
        name="vllm-tag",
        image=TAG_ONLY,
        launch_parameters={"max_model_len": 8192, "some_new_flag": 1},
    )
    client.force_login(sre)

    response = client.get(f"/runtimes/{runtime.name}/")

    page = response.content.decode()
    assert '<span class="badge warn">not pinned by digest</span>' in page
    assert "<code>max_model_len</code></td><td><code>8192</code>" in page
    assert "&#x27;some_new_flag&#x27; is not a vllm flag the ledger knows" in page
    assert "Production services refuse it." in page
    assert "No revision uses it yet" in page


def test_owner_creates_a_runtime_and_the_ledger_records_it(client, owner, team):
    client.force_login(owner)

    response = client.post("/runtimes/new", runtime_data(team))

    assert response.status_code == 302
    assert response["Location"] == "/runtimes/vllm-0-6-3-h100x2/"
    runtime = Runtime.objects.get()
    assert runtime.launch_parameters == {"max_model_len": 32768, "tensor_parallel_size": 2}
    assert Event.objects.get(action="runtime.created").actor == owner


def test_launch_parameters_must_be_a_json_object(client, owner, team):
    client.force_login(owner)

    response = client.post("/runtimes/new", runtime_data(team, launch_parameters="[1, 2]"))

    assert "Expected a JSON object" in response.content.decode()
    assert not Runtime.objects.exists()


def test_inline_validation_names_a_mistyped_engine_flag(client, owner, team):
    client.force_login(owner)

    response = validate(
        client,
        runtime_data(team, launch_parameters='{"max_model_lenn": 4096}'),
        "launch_parameters",
    )

    body = response.content.decode()
    assert body.strip().startswith('<div class="field has-error" id="field-launch_parameters">')
    assert "did you mean &#x27;max_model_len&#x27;?" in body


def test_inline_validation_refuses_invalid_json(client, owner, team):
    client.force_login(owner)

    response = validate(
        client, runtime_data(team, launch_parameters='{"max_model_len": }'), "launch_parameters"
    )

    assert "Enter a valid JSON." in response.content.decode()


def test_inline_validation_warns_that_a_tag_only_image_is_not_pinned(client, owner, team):
    client.force_login(owner)

    response = validate(client, runtime_data(team, image=TAG_ONLY), "image")

    body = response.content.decode()
    assert 'class="field has-warning"' in body
    assert '<span class="badge warn">warning</span>' in body
    assert "is not pinned by digest" in body


def test_inline_validation_refuses_a_malformed_image(client, owner, team):
    client.force_login(owner)

    response = validate(client, runtime_data(team, image="Not An Image"), "image")

    assert "Expected a container image reference" in response.content.decode()


def test_owner_edits_an_unserved_runtime(client, owner, team):
    runtime = RuntimeFactory(team=team, name="vllm-a")
    client.force_login(owner)

    response = client.post(
        "/runtimes/vllm-a/edit",
        runtime_data(team, name="ignored", engine_version="0.6.4", image=runtime.image),
    )

    assert response.status_code == 302
    runtime.refresh_from_db()
    assert runtime.name == "vllm-a"
    assert runtime.engine_version == "0.6.4"
    event = Event.objects.get(action="runtime.updated")
    assert event.payload_data["after"]["engine_version"] == "0.6.4"


def test_locked_runtime_edit_says_why_and_offers_a_new_runtime(client, owner, team):
    service = ServiceFactory(team=team, slug="kb-assistant")
    revision = RevisionFactory(service=service)
    services.set_live_revision(service, revision, actor=None)
    name = revision.runtime.name
    client.force_login(owner)
    before = Event.objects.count()

    page = client.get(f"/runtimes/{name}/edit").content.decode()
    client.post(f"/runtimes/{name}/edit", runtime_data(team, engine_version="9"))

    assert "kb-assistant r1 has served with it" in page
    assert f'href="/runtimes/new?from={name}"' in page
    assert '<form method="post" class="stacked"' not in page
    assert Event.objects.count() == before


def test_new_runtime_from_this_one_prefills_all_but_the_name(client, owner, team):
    RuntimeFactory(team=team, name="vllm-a", engine_version="0.6.3")
    client.force_login(owner)

    form = client.get("/runtimes/new?from=vllm-a").context["form"]

    assert form.initial["engine_version"] == "0.6.3"
    assert "name" not in form.initial
