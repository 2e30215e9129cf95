"""A backend's engine is the ledger's engine enum (the runtime's): `other` becomes
`openai-compatible`, the runtime's name for any other OpenAI-compatible server."""

from django.db import migrations, models


def forward(apps, schema_editor):
    apps.get_model("replay", "Backend").objects.filter(engine="other").update(
        engine="openai-compatible"
    )


def backward(apps, schema_editor):
    apps.get_model("replay", "Backend").objects.filter(engine="openai-compatible").update(
        engine="other"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("replay", "0005_metrics_scrape"),
    ]

    operations = [
        migrations.AlterField(
            model_name="backend",
            name="engine",
            field=models.CharField(
                choices=[
                    ("vllm", "vLLM"),
                    ("sglang", "SGLang"),
                    ("lmdeploy", "LMDeploy"),
                    ("tgi", "Text Generation Inference"),
                    ("ollama", "Ollama"),
                    ("llama_cpp", "llama.cpp"),
                    ("tensorrt_llm", "TensorRT-LLM"),
                    ("openai-compatible", "Other OpenAI-compatible server"),
                ],
                default="vllm",
                max_length=32,
            ),
        ),
        migrations.RunPython(forward, backward),
    ]
