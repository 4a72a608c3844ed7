# The trainctl controller image: `trainctl controller`, nothing else.
#   docker build -t ghcr.io/trainctl/trainctl-controller:0.1.0 .
# Two stages so the image carries an installed virtualenv but no compiler or pip cache.
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY trainctl ./trainctl
RUN python -m venv /opt/trainctl && /opt/trainctl/bin/pip install .

FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="trainctl-controller" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/trainctl /opt/trainctl
ENV PATH=/opt/trainctl/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A numeric non-root user, so runAsNonRoot can verify it without /etc/passwd.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["trainctl", "controller"]
