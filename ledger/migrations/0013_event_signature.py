"""Events carry the application's Ed25519 signature of their hash.

The events written before are signed here, once, by the key the migration runs
with (the one in LEDGER_SIGNING_KEY; run `migrate` with the same key as the web
and workers): from now on every event must carry a valid signature, so a row
inserted with the database's password alone is named by `verify_ledger`. The
signatures sit outside what the hashes cover, so no hash or link changes; the
append-only trigger is set aside for this one statement, by the tables' owner.
"""

from django.db import migrations, models

BATCH = 5000


def sign_existing_events(apps, schema_editor):
    from ledger.signing import sign_event_hash

    Event = apps.get_model("ledger", "Event")
    connection = schema_editor.connection
    unsigned = Event.objects.using(connection.alias).filter(signature="").order_by("sequence")
    if not unsigned.exists():
        return
    trigger = None
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = 'ledger_event'::regclass "
                "AND tgname LIKE 'pgtrigger_ledger_event_append_only%%'"
            )
            row = cursor.fetchone()
            trigger = row[0] if row else None
        if trigger:
            cursor.execute(f'ALTER TABLE ledger_event DISABLE TRIGGER "{trigger}"')
        rows = unsigned.values_list("pk", "hash").iterator(chunk_size=BATCH)
        batch = []
        for pk, event_hash in rows:
            key_id, signature = sign_event_hash(event_hash)
            batch.append((key_id, signature, pk))
            if len(batch) == BATCH:
                cursor.executemany(
                    "UPDATE ledger_event SET key_id = %s, signature = %s WHERE id = %s", batch
                )
                batch = []
        if batch:
            cursor.executemany(
                "UPDATE ledger_event SET key_id = %s, signature = %s WHERE id = %s", batch
            )
        if trigger:
            cursor.execute(f'ALTER TABLE ledger_event ENABLE TRIGGER "{trigger}"')


class Migration(migrations.Migration):

    dependencies = [
        ('ledger', '0012_user_preference'),
    ]

    operations = [
        migrations.AddField(
            model_name='event',
            name='key_id',
            field=models.CharField(blank=True, help_text='Fingerprint of the key that signed the hash.', max_length=64),
        ),
        migrations.AddField(
            model_name='event',
            name='signature',
            field=models.CharField(blank=True, help_text='Ed25519 signature of the hash, base64.', max_length=88),
        ),
        migrations.RunPython(sign_existing_events, migrations.RunPython.noop, elidable=True),
    ]
