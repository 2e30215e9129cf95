from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "releases"
    verbose_name = "Releases and rollbacks"

    def ready(self) -> None:
        from ledger import locks
        from releases.locks import referenced_by_release_past_draft

        locks.register(referenced_by_release_past_draft)
