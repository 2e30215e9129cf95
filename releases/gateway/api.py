"""The rendered gateway over the API, for whoever deploys the proxy (a GitOps job, the
compose file's sync container):

    GET /api/gateway/litellm/                  one LiteLLM config.yaml for every service
    GET /api/services/{slug}/gateway/litellm/  the part of one service

Both answer `application/yaml` with the text's sha256 in `X-Config-SHA256` and as a
strong `ETag`; a request whose `If-None-Match` names it gets 304 and no body. The text
names credentials only as `os.environ/NAME`.
"""

from __future__ import annotations

import json

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, renderers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ledger.models import Service
from releases.gateway import litellm
from releases.gateway.queries import gateway, service_texts, whole_config_text


class YAMLRenderer(renderers.BaseRenderer):
    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if isinstance(data, str):
            return data.encode()
        # Errors (404, 401) as YAML too: a mapping of what went wrong, in plain types.
        plain = json.loads(json.dumps(data, default=str))
        return litellm.render_yaml(plain if isinstance(plain, dict) else {"detail": plain}).encode()


def _answer(request: Request, text: str) -> Response:
    sha256 = litellm.config_sha256(text)
    etag = f'"{sha256}"'
    headers = {"ETag": etag, "X-Config-SHA256": sha256, "Cache-Control": "no-cache"}
    if etag in [tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")]:
        return Response(status=304, headers=headers)
    return Response(text, headers=headers)


# The YAML document's shape (LiteLLM's own names; docs/gateway.md has every field).
_CONFIG_SCHEMA = {
    "type": "object",
    "required": ["model_list", "router_settings", "general_settings"],
    "properties": {
        "model_list": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["model_name", "litellm_params", "model_info"],
                "properties": {
                    "model_name": {"type": "string", "description": "The service slug."},
                    "litellm_params": {"type": "object"},
                    "model_info": {"type": "object"},
                },
            },
        },
        "router_settings": {"type": "object"},
        "general_settings": {"type": "object"},
    },
}

_RESPONSES = {
    (200, "application/yaml"): OpenApiResponse(
        _CONFIG_SCHEMA,
        description="A LiteLLM proxy config.yaml; its sha256 is in X-Config-SHA256 and the ETag.",
    ),
    304: OpenApiResponse(description="If-None-Match named the config as it is now."),
}


class GatewayConfigView(APIView):
    renderer_classes = [YAMLRenderer]

    @extend_schema(
        summary="The LiteLLM proxy config for every live service, with the rollouts' weights",
        responses=_RESPONSES,
    )
    def get(self, request: Request) -> Response:
        return _answer(request, whole_config_text(gateway().routes))


class ServiceGatewayConfigView(APIView):
    renderer_classes = [YAMLRenderer]

    @extend_schema(
        summary="One service's part of the LiteLLM proxy config",
        responses={
            **_RESPONSES,
            404: OpenApiResponse(description="No such service, or nothing of it is live."),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        if not Service.objects.filter(slug=slug).exists():
            raise exceptions.NotFound(f"There is no service {slug!r}.")
        # The text whose sha256 the gateway.config_changed Events record.
        text = service_texts(gateway([slug])).get(slug)
        if text is None:
            raise exceptions.NotFound(
                f"Nothing of {slug} is live on a routed backend: the gateway has no route."
            )
        return _answer(request, text)
