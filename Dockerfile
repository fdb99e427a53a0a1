# Worker image: Debian with Chromium, bubblewrap and the Python docs corpus, plus the project.
FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends chromium bubblewrap python3.11-doc make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml ./
COPY deep_research deep_research
COPY workflows workflows
COPY activities activities
COPY worker.py starter.py ./
RUN pip install --no-cache-dir -e .
CMD ["python", "worker.py"]
