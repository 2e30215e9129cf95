"""Object storage goes to a real S3-compatible server over HTTP, not a patched client."""

import urllib.error
import urllib.request

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from lib import s3


def test_files_saved_through_django_storage_land_in_the_bucket(s3_storage):
    name = default_storage.save("reports/raw.json", ContentFile(b'{"ok": true}'))

    assert s3.object_exists(name)
    body = s3.client().get_object(Bucket=s3_storage, Key=name)["Body"].read()
    assert body == b'{"ok": true}'


def test_download_links_are_signed_and_expire(s3_storage, settings):
    name = default_storage.save("exports/ledger.csv", ContentFile(b"a,b\n1,2\n"))

    url = default_storage.url(name)

    assert "X-Amz-Signature=" in url
    assert f"X-Amz-Expires={settings.AWS_QUERYSTRING_EXPIRE}" in url
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.read() == b"a,b\n1,2\n"
    unsigned = url.split("?")[0]
    with pytest.raises(urllib.error.HTTPError) as excinfo:
        urllib.request.urlopen(unsigned, timeout=5)
    assert excinfo.value.code == 403


def test_ensure_bucket_is_idempotent(s3_storage):
    assert s3.ensure_bucket() is False
