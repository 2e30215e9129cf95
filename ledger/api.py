from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.generics import RetrieveAPIView

from ledger.serializers import WhoAmISerializer


@extend_schema(summary="The authenticated caller and the roles it holds")
class WhoAmIView(RetrieveAPIView):
    serializer_class = WhoAmISerializer

    def get_object(self):
        return self.request.user
