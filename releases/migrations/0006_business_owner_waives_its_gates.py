"""Business owners may waive the gates of their own part of a release (issue 26).

Each waivable gate now belongs to one sign-off role (`releases.policy.WAIVER_OWNERS`);
the business owner's, failures_classified, needs its holders to have the
`releases.waive_gate` permission, which `releases.apps.grant_default_permissions`
gives after every migrate. This grants it in a database migrated before, at once; on a
new database the permission does not exist yet here and that handler grants it.
"""

from django.db import migrations


def grant(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    db = schema_editor.connection.alias
    permission = (
        Permission.objects.using(db)
        .filter(content_type__app_label="releases", codename="waive_gate")
        .first()
    )
    if permission is None:
        return
    group, _ = Group.objects.using(db).get_or_create(name="business_owner")
    group.permissions.add(permission)


def revoke(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    db = schema_editor.connection.alias
    group = Group.objects.using(db).filter(name="business_owner").first()
    if group is not None:
        group.permissions.remove(
            *group.permissions.filter(content_type__app_label="releases", codename="waive_gate")
        )


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("releases", "0005_release_list_index"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
