# Two images from this repository (docs/architecture.md: which distribution holds what):
#   controller (the default target): trainctl-api and trainctl-controller only, running
#     `trainctl-controller`; no CLI, no embedded cluster.
#     docker build -t ghcr.io/trainctl/trainctl-controller:0.1.0 .
#   launcher: all three distributions, for the Kubeflow Pipelines steps
#     (`python -m trainctl.pipelines.launch`).
#     docker build --target launcher -t ghcr.io/trainctl/trainctl-launcher:0.1.0 .
# Build stages first so the images carry an installed virtualenv but no compiler or pip cache.
FROM python:3.11-slim-bookworm AS build-controller
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY api ./api
COPY controller ./controller
RUN python -m venv /opt/trainctl && /opt/trainctl/bin/pip install ./api ./controller

FROM build-controller AS build-launcher
COPY pyproject.toml README.md ./
COPY trainctl ./trainctl
RUN /opt/trainctl/bin/pip install .

FROM python:3.11-slim-bookworm AS runtime
LABEL org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/trainctl/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A numeric non-root user, so runAsNonRoot can verify it without /etc/passwd.
USER 65532:65532

FROM runtime AS launcher
LABEL org.opencontainers.image.title="trainctl-launcher"
COPY --from=build-launcher /opt/trainctl /opt/trainctl

FROM runtime AS controller
LABEL org.opencontainers.image.title="trainctl-controller"
COPY --from=build-controller /opt/trainctl /opt/trainctl
EXPOSE 8080 8081
ENTRYPOINT ["trainctl-controller"]
