"""The load-test upload form of the revision page.

It only collects the inputs (the two optional scrapes for GPU memory and KV-cache
peaks among them); reading the file, the size limit and who
may attach evidence are `services.import_loadtest_report`'s business, whose
refusals the view puts back onto the form.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ledger.importers import FORMATS
from ledger.metrics_import import MAX_SCRAPE_BYTES
from ledger.models import LoadTestReport
from lib.forms import NamedChoicesMixin

FORMAT_LABELS = {
    "aiperf": _("NVIDIA AIPerf (profile_export.jsonl, profile_export_aiperf.json/.csv)"),
    "genai_perf": _("NVIDIA GenAI-Perf / perf_analyzer (profile_export*.json/.csv)"),
    "guidellm": _("GuideLLM report (benchmarks.json/.csv)"),
    "inference_perf": _("Kubernetes inference-perf lifecycle report"),
    "sglang": _("SGLang bench_serving output"),
    "vllm": _("vLLM bench serve / benchmark_serving.py result"),
    "generic": _("Generic per-request CSV or JSON Lines"),
}


class LoadTestUploadForm(NamedChoicesMixin, forms.Form):
    """Workload class, the file as the tool wrote it, and an optional format override."""

    workload = forms.ChoiceField(
        label=_("Workload class"),
        choices=[("", _("Pick the workload class…")), *LoadTestReport.Workload.choices],
        help_text=_(
            "The kind of traffic the test sent. A revision keeps one current report "
            "per workload class; the newest one counts."
        ),
        error_messages={"required": _("Pick the workload class this file measured.")},
    )
    file = forms.FileField(
        label=_("Report file"),
        # The importer names an empty file itself, with the file's name.
        allow_empty_file=True,
        help_text=_(
            "Drop the file here or choose it: the JSON, JSON Lines or CSV file exactly "
            "as the benchmark tool wrote it."
        ),
        error_messages={"required": _("Choose the report file to attach.")},
    )
    format = forms.ChoiceField(
        label=_("Format"),
        required=False,
        choices=[
            ("", _("Detect from the content")),
            *((k, FORMAT_LABELS.get(k, k)) for k in FORMATS),
        ],
        help_text=_("Only when detection picks the wrong importer."),
    )

    metrics_before = forms.FileField(
        label=_("Metrics scrape before the test"),
        required=False,
        allow_empty_file=True,
        help_text=_(
            "Optional: the engine's or the DCGM exporter's /metrics saved just before the "
            "test (curl -s http://host:port/metrics > before.txt). With the scrape after it, "
            "gives the GPU memory and KV-cache peaks the report does not record itself."
        ),
    )
    metrics_after = forms.FileField(
        label=_("Metrics scrape after the test"),
        required=False,
        allow_empty_file=True,
        help_text=_(
            "Optional: the same /metrics saved just after the test. A peak read from two "
            "scrapes is the higher of the two values: a lower bound on the real peak."
        ),
    )

    accept_mismatch = forms.CharField(
        label=_("Measured on a different model, engine or GPU — reason"),
        required=False,
        max_length=500,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_(
            "Only when the file measured another model, engine or GPU than this "
            "revision and belongs here anyway: say why. The reason is recorded, and the report "
            "is marked mismatched wherever it is shown; it never counts as current evidence."
        ),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        limit = settings.LOADTEST_MAX_UPLOAD_BYTES
        up_to = gettext("Up to %(mb)s MB.") % {"mb": f"{limit / 1024 / 1024:g}"}
        self.fields["file"].help_text = f"{self.fields['file'].help_text} {up_to}"
        scrape_up_to = gettext("Up to %(mb)s MB.") % {"mb": f"{MAX_SCRAPE_BYTES / 1024 / 1024:g}"}
        for name in ("metrics_before", "metrics_after"):
            self.fields[name].help_text = f"{self.fields[name].help_text} {scrape_up_to}"
        if self.is_bound:
            # htmx keeps the chosen file when it swaps the form after a preview or an
            # error; a fresh form (after a save) must come back empty, so only bound ones.
            for name in ("file", "metrics_before", "metrics_after"):
                self.fields[name].widget.attrs["hx-preserve"] = "true"

    def clean_format(self) -> str | None:
        return self.cleaned_data["format"] or None

    def scrapes(self) -> dict[str, Any]:
        """The two scrapes as the verbs take them: each an uploaded file, or None."""
        return {name: self.cleaned_data.get(name) for name in ("metrics_before", "metrics_after")}

    def is_valid_for_preview(self) -> bool:
        """Valid as far as the preview goes: it reads the file; the workload class is
        asked for when saving, so a missing one is not an error yet."""
        self.is_valid()
        self.errors.pop("workload", None)
        return not self.errors
