# One image for every Euler process: web, worker, beat and the node agent (pick with the command).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 EULER_DATA_DIR=/var/lib/euler DJANGO_DEBUG=false
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
RUN useradd --system --home /var/lib/euler --create-home euler \
 && DJANGO_SECRET_KEY=build EULER_ENCRYPTION_KEYS="build:$(python -c 'import base64,os;print(base64.b64encode(os.urandom(32)).decode())')" \
    python manage.py collectstatic --noinput -v0 \
 && chown -R euler /var/lib/euler
USER euler
EXPOSE 8000
CMD ["python", "-m", "uvicorn", "euler.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--no-access-log", "--loop", "uvloop", "--http", "httptools"]
