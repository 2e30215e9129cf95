"""Forms of the replay pages: they shape and check input; `replay.services` writes it."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ledger.models import Revision
from lib.forms import InlineValidationMixin
from replay.models import Backend, SampleSet, Schedule

CRONTAB_HELP = gettext_lazy(
    "Five fields: minute hour day-of-month month day-of-week, in the schedule's time zone. "
    "e.g. 0 */6 * * * (every six hours) or 30 2 * * 1-5 (02:30 on weekdays)."
)
MAX_IMPORT_BYTES = 5 * 1024 * 1024


class RevisionChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Revision) -> str:
        return f"{obj.service.slug} {obj.label}"


class BackendForm(InlineValidationMixin, forms.ModelForm):
    # Inference servers inside the network mostly speak plain http.
    base_url = forms.URLField(
        label=gettext_lazy("Base URL"),
        assume_scheme="http",
        help_text=Backend._meta.get_field("base_url").help_text,
    )

    class Meta:
        model = Backend
        fields = list(Backend.STATED_FIELDS)
        field_classes = {"revision": RevisionChoiceField}
        labels = {
            "name": gettext_lazy("Name"),
            "revision": gettext_lazy("Revision"),
            "model_name": gettext_lazy("Model name"),
            "engine": gettext_lazy("Engine"),
            "concurrency_limit": gettext_lazy("Concurrency limit"),
            "connect_timeout_s": gettext_lazy("Connect timeout (s)"),
            "first_token_timeout_s": gettext_lazy("First-token timeout (s)"),
            "idle_timeout_s": gettext_lazy("Idle timeout between chunks (s)"),
            "total_timeout_s": gettext_lazy("Total timeout (s)"),
            "credential_env": gettext_lazy("Credential variable"),
            "enabled": gettext_lazy("Enabled"),
        }
        help_texts = {
            "name": gettext_lazy(
                "A slug that says what serves where, e.g. kb-assistant-vllm-canary."
            ),
            "revision": gettext_lazy(
                "The registered revision this endpoint serves; replays are recorded against it."
            ),
            "engine": gettext_lazy(
                "The inference engine behind the endpoint; probes read its version endpoint."
            ),
            "concurrency_limit": gettext_lazy(
                "Requests a replay keeps in flight at most, 1 to 512."
            ),
            "connect_timeout_s": gettext_lazy("Seconds to open the connection."),
            "first_token_timeout_s": gettext_lazy(
                "Seconds to wait for the first token before timeout_first_token."
            ),
            "idle_timeout_s": gettext_lazy(
                "Seconds allowed between two chunks before timeout_idle."
            ),
            "total_timeout_s": gettext_lazy("Seconds for the whole answer before timeout_total."),
            "enabled": gettext_lazy(
                "Disabled backends are neither replayed on schedule nor probed."
            ),
        }

    def __init__(self, *args: Any, revisions: QuerySet[Revision], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(RevisionChoiceField, self.fields["revision"]).queryset = revisions
        if self.instance.pk:
            # The name is how pages, schedules and the API address it.
            self.fields["name"].disabled = True

    def _get_validation_exclusions(self):
        # The model's rules are checked by `services.create_backend`/`update_backend`,
        # whose messages say what to do (a database constraint's name does not).
        return {field.name for field in self.instance._meta.fields}


class RunStartForm(forms.Form):
    sample_set = forms.ModelChoiceField(
        queryset=SampleSet.objects.none(),
        label=gettext_lazy("Sample set"),
        help_text=gettext_lazy(
            "The latest version of each set; the run records the version it used."
        ),
    )
    concurrency = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=512,
        label=gettext_lazy("Concurrency"),
        help_text=gettext_lazy("Requests in flight; leave empty for the backend's limit."),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        sample_set = cast("forms.ModelChoiceField[SampleSet]", self.fields["sample_set"])
        sample_set.queryset = latest_versions()
        sample_set.empty_label = None


class ScheduleForm(InlineValidationMixin, forms.Form):
    sample_set_name = forms.ChoiceField(
        label=gettext_lazy("Sample set"),
        help_text=gettext_lazy("Each firing replays the latest version of this set."),
    )
    crontab = forms.CharField(
        label=gettext_lazy("When (crontab)"), max_length=200, help_text=CRONTAB_HELP
    )
    purpose = forms.ChoiceField(
        choices=Schedule.Purpose.choices,
        initial=Schedule.Purpose.REGULAR,
        label=gettext_lazy("Purpose"),
        help_text=gettext_lazy(
            "Rollback-target verification is what a service's 'last verified' reads."
        ),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = SampleSet.objects.order_by("name").values_list("name", flat=True).distinct()
        cast(forms.ChoiceField, self.fields["sample_set_name"]).choices = [
            (name, name) for name in names
        ]


class ScheduleEditForm(InlineValidationMixin, forms.Form):
    crontab = forms.CharField(
        label=gettext_lazy("When (crontab)"), max_length=200, help_text=CRONTAB_HELP
    )
    enabled = forms.BooleanField(
        required=False,
        label=gettext_lazy("Enabled"),
        help_text=gettext_lazy("A disabled schedule stays here but does not fire."),
    )


class SampleSetImportForm(forms.Form):
    name = forms.SlugField(
        max_length=100,
        label=gettext_lazy("Name"),
        help_text=gettext_lazy(
            "The set's name, e.g. kb-smoke. Importing into an existing name makes a new "
            "version when anything changed."
        ),
    )
    description = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=gettext_lazy("Description"),
        help_text=gettext_lazy("What the set covers and when it is replayed."),
    )
    jsonl_file = forms.FileField(
        label=gettext_lazy("JSONL file"),
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ".jsonl,.ndjson,application/x-ndjson"}),
        help_text=gettext_lazy(
            "One sample per line, as the export writes it. Or paste the lines below."
        ),
    )
    jsonl_text = forms.CharField(
        label=gettext_lazy("Or paste JSONL"),
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false"}),
        help_text=gettext_lazy(
            'e.g. {"key": "capital-fr", "category": "short_qa", "messages": [{"role": '
            '"user", "content": "Capital of France?"}], "checks": [{"type": "contains", '
            '"value": "Paris"}]}'
        ),
    )

    def clean_jsonl_file(self) -> str | None:
        upload = self.cleaned_data.get("jsonl_file")
        if not upload:
            return None
        if upload.size > MAX_IMPORT_BYTES:
            raise ValidationError(
                _("The file has %(size)s bytes; at most %(limit)s are accepted.")
                % {"size": f"{upload.size:,}", "limit": f"{MAX_IMPORT_BYTES:,}"}
            )
        try:
            return upload.read().decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise ValidationError(
                _("The file is not UTF-8 text (byte %(byte)s cannot be decoded).")
                % {"byte": error.start}
            ) from None

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        from_file, pasted = data.get("jsonl_file"), data.get("jsonl_text", "")
        if self.errors.get("jsonl_file"):
            return data
        if from_file and pasted.strip():
            raise ValidationError(_("Give a file or pasted lines, not both."))
        if not from_file and not pasted.strip():
            self.add_error("jsonl_text", _("Choose a .jsonl file or paste its lines here."))
        data["jsonl"] = from_file or pasted
        return data


def latest_versions() -> QuerySet[SampleSet]:
    """The newest version of every sample set, by name (SQLite has no DISTINCT ON)."""
    newest = SampleSet.objects.filter(name=OuterRef("name")).order_by("-version")
    return SampleSet.objects.filter(version=Subquery(newest.values("version")[:1])).order_by("name")
