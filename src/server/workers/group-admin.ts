// With `--workers N` the primary serves the HTTP ports once for the whole group: sluice's admin port
// (/healthz, /readyz, /metrics, /rules) and the reference's ports (/healthcheck, POST /json, /rlconfig,
// Prometheus). Workers serve none of them; they answer the primary's questions (group-ipc.ts).
// - /readyz and /healthcheck: ready only when every slot has a worker that serves and says so.
// - /rules: one worker's view; when their rule generations differ (a reload reaching them at different
//   moments) the body says so (`workers_agree: false` and each worker's generation). Its RLQS buckets are
//   every worker's (each serves its own streams); `?only=rlqs` asks for those alone.
// - POST /json decides one request: handed to the workers in turn, any one may decide it.
// - /metrics: worker-metrics.ts.
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { HttpListener } from "../reference/http-listeners.js";
import { rlconfigText } from "../../inspect/rlconfig-text.js";
import type { Limiter } from "../../limiter/limiter.js";
import { mergeRlqs, RULES_ONLY_ERROR, rlqsJson, rulesJson, rulesOnly, type RlqsBucketSource, type RlqsJson } from "../../inspect/rules-json.js";
import type { RuleSet } from "../../rules/model.js";
import type { Metrics } from "../../telemetry/metrics.js";
import type { AdminHandler, AdminResponse, BodyRoute, Readiness, RunningAdminServer } from "../admin/admin.js";
import type { AdminAccess } from "../admin/admin-access.js";
import { startAdminPort } from "../admin/admin-port.js";
import { ListenError, logListenError, type ListenSetting } from "../admin/listen-error.js";
import type { RequestBounds } from "../grpc/decode.js";
import { answerQuestions, askWorker } from "./group-ipc.js";
import { debugRoutes, statsRoute } from "../reference/http-debug.js";
import type { ReferenceHealth } from "../reference/http-health.js";
import { jsonRoute } from "../reference/http-json.js";
import { startReferenceListeners, type RunningReferenceListeners } from "../reference/http-listeners.js";
import type { CallObserver } from "../grpc/grpc-contract.js";
import { GroupMetrics, SCRAPE_TIMEOUT_MS } from "./worker-metrics.js";
import type { GroupMember, GroupServices, WorkerGroup } from "./workers.js";

/** A POST /json decision waits on the store; its deadline is the store's business, this is the backstop. */
const JSON_TIMEOUT_MS = 5000;

interface GroupAdminOptions {
  adminHost: string;
  adminPort: number;
  adminAccess: AdminAccess;
  listenSettings: { admin: ListenSetting };
  referenceHttp?: HttpListener;
  referenceDebug?: HttpListener;
  prometheus?: HttpListener & { path: string };
  maxMessageBytes: number;
  /** EXTRA_TAGS: the primary's own series carry them as the workers' do. */
  metricLabels: Record<string, string>;
  logger: Logger;
}

interface WorkerReadiness extends Readiness {
  generation: string;
}

interface WorkerRules {
  generation: string;
  rules: ReturnType<typeof rulesJson>;
}

/** Asks every member; answers by slot, with the slots that did not answer in time. */
async function askAll<T>(members: GroupMember[], question: "ready" | "rules" | "rlqs" | "health" | "stats", logger: Logger) {
  const answers = new Map<number, T>();
  const missing: number[] = [];
  await Promise.all(
    members.map(async (m) => {
      try {
        answers.set(m.slot, (await askWorker(m.worker, question, SCRAPE_TIMEOUT_MS)) as T);
      } catch (err) {
        missing.push(m.slot);
        logger.warn({ worker: m.slot, pid: m.worker.process.pid, question, err: (err as Error).message }, "worker did not answer");
      }
    }),
  );
  return { answers, missing: missing.sort((a, b) => a - b) };
}

function groupRoutes(group: WorkerGroup, metrics: GroupMetrics, logger: Logger) {
  const readyz: AdminHandler = async () => {
    const members = group.members();
    const { answers, missing } = await askAll<WorkerReadiness>(members, "ready", logger);
    const workers = members.map((m) => ({ worker: m.slot, pid: m.worker.process.pid, ...(answers.get(m.slot) ?? { ready: false, answered: false }) }));
    const generations = new Set([...answers.values()].map((a) => a.generation));
    const ready = members.length === group.size && missing.length === 0 && [...answers.values()].every((a) => a.ready);
    const body = { ready, workers_expected: group.size, workers_serving: workers.filter((w) => w.ready).length, rules_agree: generations.size <= 1, workers };
    return { status: ready ? 200 : 503, body };
  };
  const rlqsOfAll = async () => {
    const { answers } = await askAll<RlqsJson | null>(group.members(), "rlqs", logger);
    return mergeRlqs([...answers.entries()].sort(([a], [b]) => a - b).map(([, r]) => r));
  };
  const rules: AdminHandler = async (q) => {
    const only = rulesOnly(q);
    if (only === undefined) return { status: 400, body: RULES_ONLY_ERROR };
    if (only === "rlqs") {
      const buckets = await rlqsOfAll();
      return { status: 200, body: buckets ? { rlqs: buckets } : {} };
    }
    const [{ answers }, buckets] = await Promise.all([askAll<WorkerRules>(group.members(), "rules", logger), rlqsOfAll()]);
    const all = [...answers.entries()].sort(([a], [b]) => a - b);
    if (all.length === 0) return { status: 503, body: "no worker answered\n" };
    const agree = new Set(all.map(([, a]) => a.generation)).size === 1;
    const withRlqs = buckets ? { ...all[0][1].rules, rlqs: buckets } : all[0][1].rules;
    if (agree) return { status: 200, body: withRlqs };
    return { status: 200, body: { ...withRlqs, workers_agree: false, workers: all.map(([slot, a]) => ({ worker: slot, generation: a.generation })) } };
  };
  const healthcheck: AdminHandler = async () => {
    const members = group.members();
    const { answers, missing } = await askAll<boolean>(members, "health", logger);
    const healthy = members.length === group.size && missing.length === 0 && [...answers.values()].every(Boolean);
    return healthy ? { status: 200, body: "OK" } : { status: 500, body: "" };
  };
  const metricsRoute: AdminHandler = async () => ({ status: 200, body: await metrics.text(), contentType: "text/plain; version=0.0.4; charset=utf-8" });
  const rlconfig: AdminHandler = async () => {
    for (const m of group.members()) {
      try {
        return { status: 200, body: (await askWorker(m.worker, "rlconfig", SCRAPE_TIMEOUT_MS)) as string };
      } catch {
        /* the next worker */
      }
    }
    return { status: 503, body: "no worker answered\n" };
  };
  // The group's counters are the workers' added up.
  const stats = async () => {
    const { answers } = await askAll<[string, number][]>(group.members(), "stats", logger);
    const totals = new Map<string, number>();
    for (const list of answers.values()) for (const [name, n] of list) totals.set(name, (totals.get(name) ?? 0) + n);
    return totals;
  };
  let turn = 0;
  const json = (maxBodyBytes: number): BodyRoute => ({
    method: "POST",
    maxBodyBytes,
    async handle(body) {
      const members = group.members();
      if (members.length === 0) return { status: 503, body: "Service Unavailable: no worker serves\n" };
      const m = members[turn++ % members.length];
      try {
        return (await askWorker(m.worker, "json", JSON_TIMEOUT_MS, body)) as AdminResponse;
      } catch (err) {
        logger.warn({ worker: m.slot, err: (err as Error).message }, "worker did not answer POST /json");
        return { status: 503, body: "Service Unavailable: the worker did not answer\n" };
      }
    },
  });
  // A worker's own GET routes (/top, /ui ...: what reads the shared store), answered by the first worker that can.
  const forwarded =
    (path: string): AdminHandler =>
    async (query) => {
      const body = Buffer.from(JSON.stringify({ path, query: query?.toString() ?? "" }));
      for (const m of group.members()) {
        try {
          return (await askWorker(m.worker, "route", JSON_TIMEOUT_MS, body)) as AdminResponse;
        } catch (err) {
          logger.warn({ worker: m.slot, path, err: (err as Error).message }, "worker did not answer");
        }
      }
      return { status: 503, body: "no worker answered\n" };
    };
  return { readyz, rules, healthcheck, metrics: metricsRoute, rlconfig, stats, json, forwarded };
}

/** Starts the primary's HTTP ports (runPrimary's `services`). Undefined (after a log line) when a port cannot be had. */
export async function startGroupServices(o: GroupAdminOptions, group: WorkerGroup): Promise<GroupServices | undefined> {
  const metrics = new GroupMetrics({ members: () => group.members(), slots: group.size, labels: o.metricLabels, logger: o.logger });
  group.onExit((id, slot) => metrics.workerExited(id, slot));
  const routes = groupRoutes(group, metrics, o.logger);
  const adminRoutes = {
    "/healthz": () => ({ status: 200, body: "ok\n" }),
    "/readyz": routes.readyz,
    "/metrics": routes.metrics,
    "/rules": routes.rules,
    ...Object.fromEntries(FORWARDED_ROUTES.map((p) => [p, routes.forwarded(p)])),
  };
  let admin: RunningAdminServer;
  try {
    admin = await startAdminPort({ ...o, routes: adminRoutes });
  } catch (err) {
    if (!(err instanceof ListenError)) throw err;
    logListenError(o.logger, err);
    return undefined;
  }
  let reference: RunningReferenceListeners;
  try {
    reference = await startReferenceListeners({
      ...o,
      routes: {
        http: { "/healthcheck": routes.healthcheck, "/json": routes.json(o.maxMessageBytes) },
        debug: debugRoutes(routes.rlconfig, statsRoute(routes.stats)),
        metrics: routes.metrics,
      },
    });
  } catch (err) {
    await admin.close();
    if (!(err instanceof ListenError)) throw err;
    logListenError(o.logger, err);
    return undefined;
  }
  metrics.start();
  return {
    fields: { adminPort: admin.port, adminHost: o.adminHost, ...reference.ports },
    async close() {
      metrics.stop();
      await Promise.all([admin.close(), reference.close()]);
    },
  };
}

/** The workers' GET routes the primary forwards (cli/serve.ts gives every worker these in `routes`). */
const FORWARDED_ROUTES = ["/top", "/ui", "/explain"];

/** What a worker serves in place of the HTTP ports the primary serves for it. */
export const NOT_LISTENING = { port: 0, ports: {}, close: async () => undefined };

interface WorkerAnswerSources {
  metrics: Metrics;
  readiness(): Readiness;
  limiter: Limiter;
  health: ReferenceHealth;
  bounds: RequestBounds;
  maxMessageBytes: number;
  observer?: CallObserver;
  /** Its admin routes: FORWARDED_ROUTES are answered from them. */
  routes?: Record<string, AdminHandler>;
  /** Its RLQS streams' buckets (the primary adds up every worker's). */
  rlqs?: RlqsBucketSource;
  logger: Logger;
}

const generations = new WeakMap<RuleSet, string>();
/**
 * A short digest of the rules in force: equal in two workers when they serve the same rules. The compiled
 * set's own digest (of the files it came from) where it has one: hashing the JSON of 100,000 rules would
 * hold a worker's event loop for seconds.
 */
export function rulesGeneration(rules: RuleSet): string {
  if (rules.digest !== undefined) return createHash("sha256").update(rules.digest).digest("hex").slice(0, 16);
  let g = generations.get(rules);
  if (!g)
    generations.set(
      rules,
      (g = createHash("sha256")
        .update(JSON.stringify(rulesJson(rules)))
        .digest("hex")
        .slice(0, 16)),
    );
  return g;
}

/** In a worker: answers the primary's questions. */
export function answerGroup(s: WorkerAnswerSources): void {
  const rules = () => s.limiter.getRules();
  const json = jsonRoute({ limiter: s.limiter, bounds: s.bounds, maxBodyBytes: s.maxMessageBytes, observer: s.observer, logger: s.logger });
  answerQuestions({
    metrics: () => s.metrics.registry.getMetricsAsJSON(),
    ready: () => ({ ...s.readiness(), generation: rulesGeneration(rules()) }),
    rules: () => ({ generation: rulesGeneration(rules()), rules: rulesJson(rules()) }),
    rlqs: () => rlqsJson(s.rlqs) ?? null,
    rlconfig: () => rlconfigText(rules()),
    // statsd.ts (and hot-shots) loaded at the first /stats, not at start (idle memory).
    stats: async () => [...(await (await import("../../telemetry/statsd.js")).referenceStatTotals(s.metrics)).entries()],
    health: () => s.health.healthy(),
    json: (body) => json.handle(body),
    route: (body) => {
      const { path, query } = JSON.parse(body.toString()) as { path: string; query: string };
      const handler = FORWARDED_ROUTES.includes(path) ? s.routes?.[path] : undefined;
      return handler ? handler(new URLSearchParams(query)) : { status: 404, body: "not found\n" };
    },
  });
}
