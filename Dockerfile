# Pallas in a container (docs/deploy.md). Build: docker build -t pallas .
# Data lives in the volume /data; configuration comes from the environment or a mounted .env.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOST=0.0.0.0 \
    PORT=8080 \
    PALLAS_DATA_DIR=/data

WORKDIR /app
COPY pyproject.toml README.md bot.py ./
COPY pallas ./pallas
COPY packages ./packages
# Only the examples: the real config/ is mounted at run time (.dockerignore keeps keys out).
COPY config/*.example.yml ./config/

# The README's install command, with the PostgreSQL driver (a URL chooses the store).
RUN python -m pip install -e ".[postgres]" \
    && useradd --create-home --uid 10001 pallas \
    && mkdir -p /data && chown pallas:pallas /data

USER pallas
VOLUME ["/data"]
EXPOSE 8080

# It binds 0.0.0.0 here, so it refuses to start without ONEBOT_ACCESS_TOKEN.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('PORT', '8080') + '/pallas/api/health', timeout=4)"

CMD ["python", "bot.py"]
