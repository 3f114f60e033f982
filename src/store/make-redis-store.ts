// One Redis store as the settings describe it (the main store, or the one for per-second limits) and the
// Store it makes: one server or shards (RedisStore), a Sentinel-monitored master, or a Cluster.
import type { Logger } from "pino";
import type { PermissionNeeds } from "./acl-check.js";
import type { StoreCallObserver } from "./guarded-call.js";
import type { ScriptErrorObserver } from "./script-errors.js";
import { RedisStore } from "./redis-sharded.js";
import { RedisClusterStore, type ClusterEvents } from "./redis-cluster.js";
import { redisConnectionOptions, type RedisAuth } from "./redis-options.js";
import { sentinelConnectionOptions, type SentinelSpec } from "./redis-sentinel.js";
import type { Store } from "./store.js";

export interface RedisStoreSpec {
  /** redis[s]://... or unix:///... URLs, one per shard; empty when cluster or sentinel is given. */
  urls: string[];
  /** Redis Cluster startup nodes; empty = not a cluster. */
  cluster: { host: string; port: number }[];
  /** The Sentinel-monitored master; absent = no Sentinel. */
  sentinel?: SentinelSpec;
  /** Credentials and TLS trust of the Redis servers (the master's with Sentinel). */
  auth: RedisAuth;
  /** Credentials of the sentinels themselves. */
  sentinelAuth: RedisAuth;
}

interface RedisStoreBounds {
  timeoutMs: number;
  breakerThreshold: number;
  probeIntervalMs: number;
  logger: Logger;
  onCall?: StoreCallObserver;
  /** Told of every error reply to a script or command, by kind (metrics). */
  onScriptError?: ScriptErrorObserver;
  /** What the permission check at each connect asks for (acl-check.ts). */
  permissionNeeds?: PermissionNeeds;
  /** A Cluster's topology events (metrics). */
  clusterEvents?: () => ClusterEvents;
}

/** The spec's store; undefined when it names no Redis. Throws RedisOptionsError (unreadable file ...). */
export function redisStoreFromSpec(spec: RedisStoreSpec, bounds: RedisStoreBounds): Store | undefined {
  const { clusterEvents, ...common } = bounds;
  if (spec.urls.length > 0 || spec.sentinel) {
    return new RedisStore({
      servers: spec.sentinel
        ? [sentinelConnectionOptions(spec.sentinel, spec.auth, spec.sentinelAuth)]
        : spec.urls.map((url) => redisConnectionOptions(url, spec.auth)),
      ...common,
    });
  }
  if (spec.cluster.length > 0) {
    // Credentials for every node: those of a URL naming the first one.
    const { username, password } = redisConnectionOptions(`redis://${spec.cluster[0].host}:${spec.cluster[0].port}`, spec.auth);
    return new RedisClusterStore({ startupNodes: spec.cluster, nodeOptions: { username, password }, ...common, events: clusterEvents?.() });
  }
  return undefined;
}
