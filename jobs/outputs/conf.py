"""Settings of job outputs, read from the environment (merged into config.settings through jobs.conf).

Files go through Django's storage API: a FileSystemStorage under EULER_OUTPUTS_DIR by default, an S3-compatible
bucket (django-storages) when EULER_OUTPUTS_BUCKET is set. With a bucket, nodes upload and download with
presigned URLs; the web process never holds a file in memory either way.
"""

from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from euler.env import env_int, env_secret, env_str

_DATA_DIR = Path(env_str("EULER_DATA_DIR", str(Path(__file__).resolve().parents[2] / "var"))).resolve()

# Where the filesystem store keeps outputs (ignored when a bucket is set).
EULER_OUTPUTS_DIR = Path(env_str("EULER_OUTPUTS_DIR", str(_DATA_DIR / "outputs"))).resolve()
# An S3-compatible bucket: outputs go there (presigned PUT/GET for nodes) instead of the filesystem.
EULER_OUTPUTS_BUCKET = env_str("EULER_OUTPUTS_BUCKET", "") or ""
EULER_OUTPUTS_ENDPOINT_URL = env_str("EULER_OUTPUTS_ENDPOINT_URL", "") or ""
EULER_OUTPUTS_REGION = env_str("EULER_OUTPUTS_REGION", "us-east-1") or "us-east-1"
EULER_OUTPUTS_ACCESS_KEY_ID = env_secret("EULER_OUTPUTS_ACCESS_KEY_ID") or ""
EULER_OUTPUTS_SECRET_ACCESS_KEY = env_secret("EULER_OUTPUTS_SECRET_ACCESS_KEY") or ""
EULER_OUTPUTS_ADDRESSING_STYLE = env_str("EULER_OUTPUTS_ADDRESSING_STYLE", "auto") or "auto"
if EULER_OUTPUTS_ADDRESSING_STYLE not in ("auto", "path", "virtual"):
    raise ImproperlyConfigured("EULER_OUTPUTS_ADDRESSING_STYLE must be auto, path or virtual")
EULER_OUTPUTS_PREFIX = (env_str("EULER_OUTPUTS_PREFIX", "") or "").strip("/")
# How long a presigned upload or download URL stays valid (seconds).
EULER_OUTPUTS_URL_EXPIRY = env_int("EULER_OUTPUTS_URL_EXPIRY", 3600, minimum=60, maximum=7 * 24 * 3600)
# A job's cap on all its outputs together when its submission names none, and the largest cap it may name.
EULER_OUTPUTS_DEFAULT_JOB_BYTES = env_int("EULER_OUTPUTS_DEFAULT_JOB_BYTES", 1024**3, minimum=0)
EULER_OUTPUTS_MAX_JOB_BYTES = env_int("EULER_OUTPUTS_MAX_JOB_BYTES", 64 * 1024**3, minimum=0)
# The slowest upload the deadline backstop waits for (bytes per second): a job's outputs may take up to
# EULER_JOB_TIMEOUT_GRACE + outputs.max_bytes / this past its deadline, and only while they make progress
# (jobs/outputs/keepalive.py).
EULER_OUTPUTS_UPLOAD_RATE = env_int("EULER_OUTPUTS_UPLOAD_RATE", 1024 * 1024, minimum=1024)
# Outputs of jobs that ended longer ago than this are deleted (rows and stored files); 0 keeps them.
EULER_OUTPUTS_RETENTION_DAYS = env_int("EULER_OUTPUTS_RETENTION_DAYS", 30, minimum=0)
# The stored output bytes a new project's quota allows (Quota.output_bytes).
EULER_FREE_QUOTA_OUTPUT_BYTES = env_int("EULER_FREE_QUOTA_OUTPUT_BYTES", 10 * 1024**3, minimum=0)

if EULER_OUTPUTS_BUCKET:
    EULER_OUTPUTS_STORAGE = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": EULER_OUTPUTS_BUCKET,
            "endpoint_url": EULER_OUTPUTS_ENDPOINT_URL or None,
            "region_name": EULER_OUTPUTS_REGION,
            "access_key": EULER_OUTPUTS_ACCESS_KEY_ID or None,
            "secret_key": EULER_OUTPUTS_SECRET_ACCESS_KEY or None,
            "addressing_style": None if EULER_OUTPUTS_ADDRESSING_STYLE == "auto" else EULER_OUTPUTS_ADDRESSING_STYLE,
            "location": EULER_OUTPUTS_PREFIX,
            "file_overwrite": True,
            "default_acl": None,
            "querystring_expire": EULER_OUTPUTS_URL_EXPIRY,
            "signature_version": "s3v4",
        },
    }
else:
    EULER_OUTPUTS_STORAGE = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {
            "location": str(EULER_OUTPUTS_DIR),
            "file_permissions_mode": 0o600,
            "directory_permissions_mode": 0o700,
        },
    }

BEAT_SCHEDULE: dict = {
    "outputs-purge-expired": {"task": "jobs.outputs.tasks.purge_expired", "schedule": timedelta(hours=1)},
}
