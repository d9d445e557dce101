# syntax=docker/dockerfile:1
# nodeflavor operator image: `docker build -t nodeflavor:0.1.0 .`
# Three stages: compile TypeScript with every dependency, install production dependencies only,
# then copy both onto a distroless Node 24 runtime (no shell, no package manager, non-root).

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM node:24-bookworm-slim AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM gcr.io/distroless/nodejs24-debian12:nonroot
WORKDIR /app
ENV NODE_ENV=production
# Two malloc arenas, not one per thread: the list pages' gzip is inflated on libuv's thread pool,
# and each thread's arena kept what it had freed (10,000 nodes: 152-154 -> 141 MiB resident,
# bench/RESULTS.md, P4). Node.js's own heap is V8's, untouched by this.
ENV MALLOC_ARENA_MAX=2
# package.json carries "type": "module", which the compiled ES modules in dist/ need.
COPY --from=prod-deps /app/package.json ./package.json
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER 65532:65532
EXPOSE 8080 8443 9443
ENTRYPOINT ["/nodejs/bin/node", "dist/src/cli/nodeflavor.js"]
CMD ["run"]
