# The kai image: `kai run` (the scheduler on a real cluster) as a non-root user.
#   docker build -t REGISTRY/kai:0.1.0 .
# The chart (deploy/helm/kai) runs it with the flags of `kai run`; the entrypoint is `kai run`.
#
# The GPU reservation pods' image (one pod per shared GPU; kai run --resource-reservation-image):
#   docker build --target resource-reservation -t REGISTRY/kai-resource-reservation:0.1.0 .

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# kai and its dependencies, at the versions pyproject.toml pins, as wheels.
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# The reservation pod: one standard-library file that reports its GPU's UUID and holds the device.
FROM python:3.11-slim AS resource-reservation
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY src/kai/reservation/agent.py /opt/kai/reservation_agent.py
ENTRYPOINT ["python", "/opt/kai/reservation_agent.py"]

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels kai \
    && rm -rf /wheels \
    && groupadd --gid 65532 kai \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin kai
USER 65532:65532
ENTRYPOINT ["kai", "run"]
