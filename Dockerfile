# One image for every Euler process: web, worker, beat, migrate and the node agent (pick with the command).
# Online, the official Python image is the base; offline, scripts/build-base-images.sh builds an equivalent
# from Debian's packages: docker build --build-arg BASE=euler-base/python:3.11-bookworm .
ARG BASE=python:3.11-slim-bookworm

# The dependencies, in a venv of their own: only the runtime set, each file checked against its hash
# (requirements-runtime.lock, written by scripts/lock-requirements.sh); tests and dev tools stay out.
FROM ${BASE} AS deps
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY requirements-runtime.lock /tmp/
# deploy/build-ca/*.pem: a TLS-inspecting proxy's CA for pip, in this stage only (deploy/build-ca/README.md).
COPY deploy/build-ca/ /tmp/build-ca/
RUN python -m venv /opt/euler \
 && if ls /tmp/build-ca/*.pem >/dev/null 2>&1; then \
      cat /etc/ssl/certs/ca-certificates.crt /tmp/build-ca/*.pem > /tmp/ca-bundle.pem && export PIP_CERT=/tmp/ca-bundle.pem; fi \
 && /opt/euler/bin/pip install -q --require-hashes --no-deps -r /tmp/requirements-runtime.lock \
 && find /opt/euler -name __pycache__ -prune -exec rm -rf {} +

FROM ${BASE}
ENV PATH=/opt/euler/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 EULER_DATA_DIR=/var/lib/euler DJANGO_DEBUG=false
WORKDIR /app
# pg_dump/pg_restore of the server's major version, for `manage.py backup` and `restore` (bookworm: 15).
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql-client-15 >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* \
 && useradd --system --home /var/lib/euler --create-home euler
COPY --from=deps /opt/euler /opt/euler
COPY . .
RUN DJANGO_SECRET_KEY=build EULER_ENCRYPTION_KEYS="build:$(python -c 'import base64,os;print(base64.b64encode(os.urandom(32)).decode())')" \
    python manage.py collectstatic --noinput -v0 \
 && rm -rf deploy/build-ca \
 && chown -R euler /var/lib/euler
USER euler
EXPOSE 8000
# exec form: the server is PID 1 and gets the stop signal itself. Proxy headers (client address, scheme) are
# taken from FORWARDED_ALLOW_IPS only (uvicorn's variable; the compose file: the TLS front's network). Keep-alive:
# nodeagent/protocol_base.py's SERVER_KEEPALIVE_SECONDS (tests/deploy/test_keepalive.py reads it here).
CMD ["python", "-m", "uvicorn", "config.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--no-access-log", "--timeout-keep-alive", "10", "--loop", "uvloop", "--http", "httptools", "--proxy-headers"]
