# One image for every kubelite component; the compose file picks the sub-command.
FROM python:3.11-slim

# busybox gives the process runtime's busybox/alpine images their shell tools; etcd-server runs
# the compose file's `ha` profile's etcd members (`kubelite etcd member`).
RUN apt-get update \
 && apt-get install -y --no-install-recommends busybox curl etcd-server \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/kubelite
COPY pyproject.toml README.md ./
COPY api ./api
COPY store ./store
COPY client ./client
COPY component ./component
COPY services ./services
COPY kubelite ./kubelite
RUN pip install --no-cache-dir .

ENTRYPOINT ["kubelite"]
CMD ["--help"]
