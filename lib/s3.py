"""The one module that talks to boto3 directly.

Files themselves go through Django's storage API (django-storages' S3 backend
when AWS_STORAGE_BUCKET_NAME is set); this module holds what that API does not
cover: creating the bucket on a fresh object store and checking it is there.
"""

from __future__ import annotations

import boto3
from botocore.client import Config
from botocore.exceptions import ClientError
from django.conf import settings


def client():
    return boto3.client(
        "s3",
        endpoint_url=settings.AWS_S3_ENDPOINT_URL,
        region_name=settings.AWS_S3_REGION_NAME,
        aws_access_key_id=settings.AWS_ACCESS_KEY_ID,
        aws_secret_access_key=settings.AWS_SECRET_ACCESS_KEY,
        config=Config(signature_version="s3v4", retries={"max_attempts": 3, "mode": "standard"}),
    )


def ensure_bucket(name: str | None = None) -> bool:
    """Create the bucket if it does not exist; True when it was created."""
    bucket = name or settings.AWS_STORAGE_BUCKET_NAME
    s3 = client()
    try:
        s3.head_bucket(Bucket=bucket)
        return False
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in {"404", "NoSuchBucket", "NotFound"}:
            raise
    s3.create_bucket(Bucket=bucket)
    return True


def object_exists(key: str, bucket: str | None = None) -> bool:
    try:
        client().head_object(Bucket=bucket or settings.AWS_STORAGE_BUCKET_NAME, Key=key)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in {"404", "NoSuchKey", "NotFound"}:
            return False
        raise
    return True
