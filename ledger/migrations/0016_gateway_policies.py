"""Gateway policies, versioned per service; a revision points at one.

A revision carried its gateway policy as a free name (gw-2026.03). Each name a
service's revisions used becomes one version of that service's policy, in the order
the revisions were made, labelled with the name and with no document: *unknown*,
which the production gate refuses until a version with a document is released.
"""

import hashlib

import django.db.models.deletion
import pgtrigger.compiler
import pgtrigger.migrations
from django.conf import settings
from django.db import migrations, models


UNKNOWN_SHA256 = "sha256:" + hashlib.sha256(b"null").hexdigest()


def version_the_names(apps, schema_editor):
    Revision = apps.get_model("ledger", "Revision")
    GatewayPolicy = apps.get_model("ledger", "GatewayPolicy")
    versions: dict[int, int] = {}
    seen: set[tuple[int, str]] = set()
    rows = Revision.objects.order_by("service_id", "number").values_list(
        "service_id", "gateway_policy_version"
    )
    for service_id, name in rows:
        if (service_id, name) in seen:
            continue
        seen.add((service_id, name))
        versions[service_id] = versions.get(service_id, 0) + 1
        policy = GatewayPolicy.objects.create(
            service_id=service_id,
            version=versions[service_id],
            label=name,
            document=None,
            sha256=UNKNOWN_SHA256,
            note="Recorded by name only, before gateway policies were versioned.",
        )
        Revision.objects.filter(service_id=service_id, gateway_policy_version=name).update(
            gateway_policy=policy
        )


def names_again(apps, schema_editor):
    Revision = apps.get_model("ledger", "Revision")
    for revision in Revision.objects.select_related("gateway_policy"):
        Revision.objects.filter(pk=revision.pk).update(
            gateway_policy_version=revision.gateway_policy.label
        )


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0015_loadtestreport_model_verified"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="GatewayPolicy",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "version",
                    models.PositiveIntegerField(help_text="Counts up per service: v1, v2, …"),
                ),
                (
                    "label",
                    models.CharField(
                        help_text="How revisions name this version: v1, v2, … or the name it had before policies were versioned (gw-2026.03).",
                        max_length=40,
                    ),
                ),
                (
                    "document",
                    models.JSONField(
                        blank=True,
                        help_text="The policy (ledger/schemas/gateway_policy.schema.json); empty if unknown.",
                        null=True,
                    ),
                ),
                (
                    "sha256",
                    models.CharField(help_text="Of the document's canonical JSON.", max_length=71),
                ),
                (
                    "note",
                    models.TextField(
                        blank=True, help_text="Why this version: what changed and for whom."
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "verbose_name_plural": "gateway policies",
                "ordering": ["service", "-version"],
            },
        ),
        migrations.AddField(
            model_name="gatewaypolicy",
            name="created_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="gatewaypolicy",
            name="service",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="gateway_policies",
                to="ledger.service",
            ),
        ),
        migrations.AddConstraint(
            model_name="gatewaypolicy",
            constraint=models.UniqueConstraint(
                fields=("service", "version"), name="ledger_gatewaypolicy_version_unique"
            ),
        ),
        migrations.AddConstraint(
            model_name="gatewaypolicy",
            constraint=models.UniqueConstraint(
                fields=("service", "label"), name="ledger_gatewaypolicy_label_unique"
            ),
        ),
        migrations.AddConstraint(
            model_name="gatewaypolicy",
            constraint=models.CheckConstraint(
                condition=models.Q(("version__gte", 1)),
                name="ledger_gatewaypolicy_version_positive",
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="gatewaypolicy",
            trigger=pgtrigger.compiler.Trigger(
                name="ledger_gatewaypolicy_is_immutable",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition="WHEN (OLD.service_id IS DISTINCT FROM NEW.service_id OR OLD.version IS DISTINCT FROM NEW.version OR OLD.label IS DISTINCT FROM NEW.label OR OLD.document IS DISTINCT FROM NEW.document OR OLD.sha256 IS DISTINCT FROM NEW.sha256)",
                    func="RAISE EXCEPTION 'pgtrigger: Cannot update rows from % table', TG_TABLE_NAME;",
                    hash="1d92e23ec1b079fb669310bdf5c3d798260e4abc",
                    operation="UPDATE",
                    pgid="pgtrigger_ledger_gatewaypolicy_is_immutable_7777d",
                    table="ledger_gatewaypolicy",
                    when="BEFORE",
                ),
            ),
        ),
        migrations.AddField(
            model_name="revision",
            name="gateway_policy",
            field=models.ForeignKey(
                help_text="The version of the service's gateway policy this revision runs with.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="revisions",
                to="ledger.gatewaypolicy",
            ),
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name="revision",
            name="ledger_revision_served_is_frozen",
        ),
        # Nullable while it is removed, so that going back can add it again and fill it
        # (names_again) before it is required.
        migrations.AlterField(
            model_name="revision",
            name="gateway_policy_version",
            field=models.CharField(max_length=40, null=True),
        ),
        migrations.RunPython(version_the_names, names_again),
        migrations.AlterField(
            model_name="revision",
            name="gateway_policy",
            field=models.ForeignKey(
                help_text="The version of the service's gateway policy this revision runs with.",
                on_delete=django.db.models.deletion.PROTECT,
                related_name="revisions",
                to="ledger.gatewaypolicy",
            ),
        ),
        migrations.RemoveField(
            model_name="revision",
            name="gateway_policy_version",
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="revision",
            trigger=pgtrigger.compiler.Trigger(
                name="ledger_revision_served_is_frozen",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition="WHEN (OLD.served_at IS NOT NULL AND (OLD.service_id IS DISTINCT FROM NEW.service_id OR OLD.number IS DISTINCT FROM NEW.number OR OLD.model_asset_id IS DISTINCT FROM NEW.model_asset_id OR OLD.runtime_id IS DISTINCT FROM NEW.runtime_id OR OLD.context_limit IS DISTINCT FROM NEW.context_limit OR OLD.gateway_policy_id IS DISTINCT FROM NEW.gateway_policy_id OR OLD.fingerprint IS DISTINCT FROM NEW.fingerprint OR OLD.served_at IS DISTINCT FROM NEW.served_at))",
                    func="RAISE EXCEPTION 'pgtrigger: Cannot update rows from % table', TG_TABLE_NAME;",
                    hash="2ac1667d668ea5340815cf16c8eed949ab07046e",
                    operation="UPDATE",
                    pgid="pgtrigger_ledger_revision_served_is_frozen_edf5d",
                    table="ledger_revision",
                    when="BEFORE",
                ),
            ),
        ),
    ]
