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
# sluice's memory setting (README "Memory"), as in `npm start` and the sluice bin; an environment variable so
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
USER node
EXPOSE 8081
CMD ["node", "dist/main.js", "serve"]
