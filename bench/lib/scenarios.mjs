// What each scenario sends and against which store. Descriptor sets put the client id into every
// per-client value (see frame.mjs: requestTemplate), matching bench/rules/bench.yaml.

export const DOMAIN = "bench";

export const DESCRIPTOR_SETS = {
  /** Two token-bucket descriptors per request: per API key and per client address. */
  tb2: (id) => [[["api_key", "key-" + id]], [["remote_address", "10." + id]]],
  /** Five token-bucket descriptors per request. */
  tb5: (id) => [
    [["api_key", "key-" + id]],
    [["remote_address", "10." + id]],
    [["account", "acct-" + id]],
    [["tenant", "tenant-" + id]],
    [["path", "/api/" + id]],
  ],
  /** One token bucket (bench/redis-cost.mjs: Redis time per check against the reference token-bucket script). */
  tb1: (id) => [[["api_key", "key-" + id]]],
  /** One, two and five fixed windows (redis-cost.mjs). */
  fw1: (id) => [[["fw_api_key", "key-" + id]]],
  fw2: (id) => [[["fw_api_key", "key-" + id]], [["fw_remote_address", "10." + id]]],
  fw5: (id) => [
    [["fw_api_key", "key-" + id]],
    [["fw_remote_address", "10." + id]],
    [["fw_account", "acct-" + id]],
    [["fw_tenant", "tenant-" + id]],
    [["fw_path", "/api/" + id]],
  ],
  /** One sliding window, one calendar quota (redis-cost.mjs: Redis time per check of each algorithm). */
  sw1: (id) => [[["sw_api_key", "key-" + id]]],
  q1: (id) => [[["q_api_key", "key-" + id]]],
  /** A client with one token bucket and one fixed window (redis-cost.mjs: bytes per client). */
  client: (id) => [[["api_key", "key-" + id]], [["fw_api_key", "key-" + id]]],
  /** tb2's two buckets as approximate limits (leases of up to 10 s), under their own keys. */
  tb2approx: (id) => [[["approx_api_key", "key-" + id]], [["approx_remote_address", "10." + id]]],
  /** One descriptor, one key, refused: the reference write-up's Step 4 attacker (2/s, burst 20). */
  hot: (id) => [[["attacker", "bot-" + id]]],
};

/**
 * store: memory | redis | shards (3 servers) | cluster (3 masters); set: a DESCRIPTOR_SETS name; clients: distinct client ids sent
 * (1 = one fixed body, which h2load can send); workers: sluice processes; needs: a `sluice serve`
 * flag the scenario depends on (skipped when the usage text lacks it); storeArgs: serve's flags for
 * the store, given the Redis URLs (default: --redis URL); approximate: its limits are approximate (left
 * out of the sizing); targets: what the scenario must show in the run (lib/checks.mjs): Redis script
 * calls per request at most `redisCallsPerRequest`, calls/s at least `vsMemory.ratio` x scenario
 * `vsMemory.id`'s in the same run.
 */
export const SCENARIOS = [
  { id: "memory-2tb", store: "memory", set: "tb2", clients: 10_000, note: "memory store, 2 token buckets, 10k clients" },
  { id: "redis-2tb", store: "redis", set: "tb2", clients: 10_000, note: "Redis, 2 token buckets, 10k clients" },
  {
    id: "approx-2tb",
    store: "redis",
    set: "tb2approx",
    clients: 10_000,
    approximate: true,
    // Leases must make Redis calls rare and cost little against the memory store.
    targets: { redisCallsPerRequest: 0.05, vsMemory: { id: "memory-2tb", ratio: 0.9 } },
    note: "Redis, 2 approximate token buckets (leases of up to 10 s), 10k clients",
  },
  { id: "redis-2tb-1client", store: "redis", set: "tb2", clients: 1, note: "Redis, 2 token buckets, one fixed body (h2load)" },
  { id: "redis-5tb", store: "redis", set: "tb5", clients: 10_000, note: "Redis, 5 token buckets, 10k clients" },
  { id: "redis-2tb-1k", store: "redis", set: "tb2", clients: 1_000, note: "Redis, 2 token buckets, 1,000 clients" },
  { id: "redis-2tb-1m", store: "redis", set: "tb2", clients: 1_000_000, note: "Redis, 2 token buckets, 1,000,000 clients" },
  { id: "hot-refused", store: "redis", set: "hot", clients: 1, note: "one hot refused key (deny note)" },
  { id: "redis-2tb-2w", store: "redis", set: "tb2", clients: 10_000, workers: 2, note: "Redis, 2 token buckets, 10k clients, --workers 2" },
  {
    id: "shards-2tb",
    store: "shards",
    set: "tb2",
    clients: 10_000,
    storeArgs: (urls) => ["--redis", urls.join(",")],
    note: "3 independent Redis (--redis url1,url2,url3), 2 token buckets, 10k clients",
  },
  {
    id: "cluster-2tb",
    store: "cluster",
    set: "tb2",
    clients: 10_000,
    // Skipped ("not available") when `sluice serve` lacks the flag.
    needs: "--redis-cluster",
    storeArgs: (urls) => ["--redis-cluster", urls.map((u) => u.replace(/^redis:\/\//, "")).join(",")],
    note: "Redis Cluster, 3 masters, 2 token buckets, 10k clients",
  },
];
