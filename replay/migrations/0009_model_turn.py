"""Model-turn replay: a not re-runnable sample may carry recorded tool results, and each
result says what was sent of its sample (re-run, model turn only, skipped). Results
written before were either sent whole or skipped, as their outcome says."""

from django.db import migrations, models


def forward(apps, schema_editor):
    apps.get_model("replay", "Result").objects.filter(outcome="skipped").update(mode="skipped")


class Migration(migrations.Migration):
    dependencies = [
        ("replay", "0008_backend_metrics_matcher"),
    ]

    operations = [
        migrations.AlterField(
            model_name="sample",
            name="rerunnable",
            field=models.BooleanField(
                default=True,
                help_text="False for requests with side effects: never sent as recorded; with "
                "recorded tool results only the model turn is sent.",
            ),
        ),
        migrations.AddField(
            model_name="result",
            name="mode",
            field=models.CharField(
                choices=[
                    ("rerun", "Re-run"),
                    ("model_turn", "Model turn only"),
                    ("skipped", "Skipped (not re-runnable)"),
                ],
                default="rerun",
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="sample",
            name="tool_results",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.RunPython(forward, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="result",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("mode", "skipped"), ("outcome", "skipped")),
                    models.Q(
                        models.Q(("outcome", "skipped"), _negated=True),
                        models.Q(("mode", "skipped"), _negated=True),
                    ),
                    _connector="OR",
                ),
                name="replay_result_skipped_is_not_sent",
            ),
        ),
        migrations.AddConstraint(
            model_name="sample",
            constraint=models.CheckConstraint(
                condition=models.Q(("rerunnable", False), ("tool_results", []), _connector="OR"),
                name="replay_sample_tool_results_not_rerunnable",
            ),
        ),
    ]
