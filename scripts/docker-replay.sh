#!/usr/bin/env bash
# Replays apps/rendezvous/deploy/Dockerfile without Docker (no engine or image registry here): packs the
# context it copies, then runs its ENV/WORKDIR/COPY/RUN steps in a clean directory standing for the image's root,
# starts its ENTRYPOINT as the service user, runs its HEALTHCHECK and checks the key landed in the volume.
# See scripts/docker-replay.mjs. Usage: bash scripts/docker-replay.sh  (after pnpm build; root maps the service
# user to nobody, others run it as themselves)
set -euo pipefail
cd "$(dirname "$0")/.."
node scripts/pack.mjs
exec node scripts/docker-replay.mjs apps/rendezvous/deploy/Dockerfile
