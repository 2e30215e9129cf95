"""Registry factories. They build rows through the domain layer where it matters
(events, fingerprints); set only the fields a test is about."""

from __future__ import annotations

import hashlib

import factory

from ledger import services
from ledger.models import License, ModelAsset, Revision, Runtime, Service, Team


def digest(seed: str) -> str:
    return "sha256:" + hashlib.sha256(seed.encode()).hexdigest()


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team
        django_get_or_create = ("slug",)
        skip_postgeneration_save = True

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda t: t.slug.replace("-", " ").title())

    @factory.post_generation
    def members(team, create, extracted, **kwargs):
        if create and extracted:
            team.members.add(*extracted)


class LicenseFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = License
        django_get_or_create = ("spdx_id",)

    spdx_id = "Apache-2.0"
    name = "Apache License 2.0"
    kind = License.Kind.PERMISSIVE


def _domain_create(verb):
    """Build the model through a domain verb (actor None: the system)."""

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        return verb(actor=None, **kwargs)

    return _create


class ServiceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Service

    slug = factory.Sequence(lambda n: f"service-{n}")
    name = factory.LazyAttribute(lambda s: s.slug.replace("-", " ").title())
    team = factory.SubFactory(TeamFactory)
    tier = Service.Tier.INTERNAL
    _create = _domain_create(services.create_service)


class ModelAssetFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ModelAsset

    name = factory.Sequence(lambda n: f"Model-{n}-7B-Instruct")
    revision = "main"
    team = factory.SubFactory(TeamFactory)
    family = "qwen2.5"
    source_repository = factory.LazyAttribute(lambda a: f"example/{a.name}")
    weights_digest = factory.LazyAttribute(lambda a: digest(f"weights:{a.name}:{a.revision}"))
    license = factory.SubFactory(LicenseFactory)
    tokenizer_digest = factory.LazyAttribute(lambda a: digest(f"tokenizer:{a.name}"))
    chat_template_digest = factory.LazyAttribute(lambda a: digest(f"template:{a.name}"))
    generation_config_digest = factory.LazyAttribute(lambda a: digest(f"genconfig:{a.name}"))
    config_digest = factory.LazyAttribute(lambda a: digest(f"config:{a.name}"))
    _create = _domain_create(services.register_asset)


class RuntimeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Runtime

    name = factory.Sequence(lambda n: f"vllm-runtime-{n}")
    team = factory.SubFactory(TeamFactory)
    engine = "vllm"
    engine_version = "0.6.3"
    image = factory.LazyAttribute(
        lambda r: f"registry.example.com/vllm-openai:v0.6.3@{digest(r.name)}"
    )
    launch_parameters = factory.LazyFunction(
        lambda: {"max_model_len": 32768, "tensor_parallel_size": 1}
    )
    gpu_model = "H100-80GB"
    gpu_count = 1
    _create = _domain_create(services.create_runtime)


class RevisionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Revision

    service = factory.SubFactory(ServiceFactory)
    model_asset = factory.SubFactory(
        ModelAssetFactory, team=factory.SelfAttribute("..service.team")
    )
    runtime = factory.SubFactory(RuntimeFactory, team=factory.SelfAttribute("..service.team"))
    context_limit = 32768
    gateway_policy_version = "gw-1"

    @classmethod
    def _create(cls, model_class, *args, service, **kwargs):
        return services.create_revision(service, actor=None, **kwargs)
