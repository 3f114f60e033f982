# syntax=docker/dockerfile:1
# sluice: build with all dependencies, run with production ones only.

FROM node:24.21.0-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` runs tsc, and the sources are not copied yet.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npm run build

FROM node:24.21.0-bookworm-slim
ENV NODE_ENV=production
# sluice's memory setting (docs/operating.md "Memory"), as in `npm start` and the sluice bin; an environment variable so
# that a command or args override keeps it. Setting NODE_OPTIONS yourself replaces it: include the flag.
ENV NODE_OPTIONS=--max-semi-space-size=16
WORKDIR /app
COPY package.json package-lock.json ./
# No TypeScript or test tools here; --ignore-scripts because `prepare` (tsc) is for development installs.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
# What sluice reads at run time (package.json "files"): the compiled code, the wire contract, the Redis
# scripts and the default rules (docker-compose.yml mounts ./config over them).
COPY --from=build /app/dist ./dist
COPY protos ./protos
COPY lua ./lua
COPY config ./config
# The reference image's command, so a Deployment written for envoyproxy/ratelimit (Envoy Gateway's runs
# /bin/ratelimit) needs only the image changed.
COPY --chmod=755 deploy/image/ratelimit /bin/ratelimit
# The admin port stays on loopback (its /top, /ui, /explain and /rules name clients and rules): a Deployment
# that probes or scrapes it from outside sets SLUICE_ADMIN_HOST=0.0.0.0 (deploy/kubernetes, docker-compose.yml
# do), and SLUICE_ADMIN_TOKEN_FILE for the rest. The gRPC port binds 0.0.0.0 already.
USER node
# gRPC (SLUICE_PORT), admin HTTP (SLUICE_ADMIN_PORT)
EXPOSE 8081 8080
# No curl or wget in the image: Node's fetch asks /readyz (503 while shutting down) on the admin port, bounded.
# The port comes from SLUICE_ADMIN_PORT: move it with that variable, not with --admin-port.
HEALTHCHECK --interval=5s --timeout=5s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.SLUICE_ADMIN_PORT||8080)+'/readyz',{signal:AbortSignal.timeout(3000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "dist/bin.js", "serve"]
