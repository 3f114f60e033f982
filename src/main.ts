#!/usr/bin/env node
// CLI: sluice serve | check. Builds Settings -> Store -> Limiter -> servers; nothing else lives here.
import path from "node:path";
import { pino, type Logger } from "pino";
import { Limiter } from "./limiter/limiter.js";
import { loadRuleDir } from "./rules/load.js";
import { formatRuleError, type RuleSet } from "./rules/model.js";
import { startGrpcServer } from "./server/grpc.js";
import { announceListening, isWorker, runPrimary, workerPort } from "./server/workers.js";
import { serveSettings, UsageError, type Settings } from "./settings.js";
import { MemoryStore } from "./store/memory.js";
import { RedisStore } from "./store/redis.js";
import type { Store } from "./store/store.js";

const USAGE = `usage:
  sluice serve [--config DIR] [--redis URL] [--port N] [--host ADDR] [--merge-domains] [--workers N]
  sluice check [DIR] [--merge-domains]`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === "serve") return await serve(serveSettings(rest, process.env));
    if (command === "check") return check(rest);
    if (command === "help" || command === "--help" || command === "-h") {
      process.stdout.write(USAGE + "\n");
      return 0;
    }
    throw new UsageError(command ? `unknown command '${command}'` : "no command given");
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`sluice: ${err.message}\n${USAGE}\n`);
      return 2;
    }
    throw err;
  }
}

function check(args: string[]): number {
  const positionals = args.filter((a) => !a.startsWith("--"));
  const flags = args.filter((a) => a.startsWith("--"));
  for (const f of flags) if (f !== "--merge-domains") throw new UsageError(`unknown option '${f}'`);
  if (positionals.length > 1) throw new UsageError("check takes one directory");
  const dir = positionals[0] ?? "config";
  const result = loadRuleDir(dir, { mergeDomains: flags.includes("--merge-domains") || process.env.SLUICE_MERGE_DOMAINS === "true" });
  for (const w of result.warnings) process.stderr.write(`warning: ${w}\n`);
  if (!result.rules) {
    for (const e of result.errors) process.stderr.write(formatRuleError(e) + "\n");
    return 1;
  }
  process.stdout.write("ok\n");
  for (const line of summarize(result.rules)) process.stdout.write(line + "\n");
  return 0;
}

function summarize(rules: RuleSet): string[] {
  return [...rules.domains.values()].map(
    (d) => `domain ${d.domain}: ${d.ruleCount} limit${d.ruleCount === 1 ? "" : "s"} from ${d.files.map((f) => path.basename(f)).join(", ")}`,
  );
}

async function serve(settings: Settings): Promise<number> {
  const logger = pino({ level: settings.logLevel, base: { service: "sluice" } });
  if (settings.workers > 1 && !isWorker()) {
    const { workers, host, port, shutdownGraceMs } = settings;
    return runPrimary({ workers, host, port, shutdownGraceMs, logger });
  }
  const s = { ...settings, port: workerPort(settings.port) };
  const loaded = loadRuleDir(s.configDir, { mergeDomains: s.mergeDomains });
  for (const w of loaded.warnings) logger.warn({ dir: s.configDir }, w);
  if (!loaded.rules) {
    for (const e of loaded.errors) process.stderr.write(formatRuleError(e) + "\n");
    logger.error({ dir: s.configDir, errors: loaded.errors.length }, "rules failed to load");
    return 1;
  }
  logger.info(
    { dir: s.configDir, domains: Object.fromEntries([...loaded.rules.domains].map(([k, d]) => [k, d.ruleCount])) },
    "rules loaded",
  );

  const store = makeStore(s, logger);
  await store.start();
  const limiter = new Limiter(loaded.rules, store);
  const grpcServer = await startGrpcServer(limiter, {
    host: s.host,
    port: s.port,
    bounds: s.bounds,
    maxMessageBytes: s.maxMessageBytes,
    logger,
  });
  grpcServer.setServing(true);
  announceListening(logger, { port: grpcServer.port, host: s.host, store: store.name });

  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, "shutting down");
      grpcServer
        .shutdown(s.shutdownGraceMs)
        .then(() => store.close())
        .then(
          () => {
            logger.info("stopped");
            resolve(0);
          },
          (err) => {
            logger.error({ err }, "shutdown failed");
            resolve(1);
          },
        );
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
}

function makeStore(s: Settings, logger: Logger): Store {
  if (s.redisUrl) return new RedisStore({ url: s.redisUrl, timeoutMs: s.storeTimeoutMs, logger });
  logger.info("no --redis given: embedded memory store, single-instance mode (counters are not shared)");
  return new MemoryStore({});
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`sluice: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
