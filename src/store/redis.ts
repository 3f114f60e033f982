// Redis store: one composed Lua script per request (lua/apply.lua), EVALSHA through ioredis.
import { Redis } from "ioredis";
import type { Logger } from "pino";
import { redisConnectionOptions, type RedisAuth } from "./redis-options.js";
import { applyScript, REPLY_PER_CHECK, scriptArgs } from "./scripts.js";
import { StoreUnavailableError, type Check, type CheckResult, type Store, type StoreStatus } from "./store.js";

type ScriptClient = Redis & { sluiceApply(numKeys: number, ...args: string[]): Promise<unknown> };

/** Reconnect delay cap: a restarted Redis is used again within about a second. */
const MAX_RECONNECT_DELAY_MS = 1000;

export class RedisStore implements Store {
  readonly name = "redis";
  private readonly redis: ScriptClient;
  private readonly logger: Logger;
  private readonly where: string;
  /** undefined until the first attempt finished; logged only when it changes. */
  private up: boolean | undefined;
  private loading: Promise<void> | undefined;
  private closing = false;

  constructor(opts: { url: string; auth?: RedisAuth; timeoutMs: number; logger: Logger }) {
    this.logger = opts.logger;
    this.redis = new Redis({
      ...redisConnectionOptions(opts.url, opts.auth),
      lazyConnect: true, // start() makes the first attempt
      enableAutoPipelining: true,
      enableOfflineQueue: false, // a down Redis fails calls at once instead of queueing them
      maxRetriesPerRequest: 0, // never resend a script after a disconnect: it may have run
      commandTimeout: opts.timeoutMs,
      connectTimeout: Math.max(1000, opts.timeoutMs),
      retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 10), MAX_RECONNECT_DELAY_MS),
    }) as ScriptClient;
    // Host and port only: the URL may carry a password.
    this.where = `redis ${this.redis.options.host}:${this.redis.options.port}`;
    this.redis.defineCommand("sluiceApply", { lua: applyScript() });
    this.redis.on("ready", () => {
      this.loading = this.loadScript();
    });
    // Without an 'error' listener ioredis errors would crash the process.
    this.redis.on("error", (err: Error) => this.markDown(err.message));
    this.redis.on("close", () => this.markDown("connection closed"));
  }

  async start(): Promise<void> {
    try {
      await this.redis.connect();
      await (this.loading ?? this.loadScript());
    } catch (err) {
      this.markDown((err as Error).message);
    }
  }

  status(): StoreStatus {
    const id = `${this.redis.options.host}:${this.redis.options.port}`;
    return { kind: "redis", nodes: [{ id, state: this.up ? "up" : "down" }] };
  }

  async apply(checks: Check[]): Promise<CheckResult[]> {
    if (checks.length === 0) return [];
    let reply: unknown;
    try {
      reply = await this.redis.sluiceApply(checks.length, ...scriptArgs(checks));
    } catch (err) {
      throw new StoreUnavailableError(`${this.where}: rate-limit script failed: ${(err as Error).message}`, err);
    }
    if (!Array.isArray(reply) || reply.length !== checks.length * REPLY_PER_CHECK) {
      throw new StoreUnavailableError(`${this.where}: unexpected rate-limit script reply`);
    }
    const out: CheckResult[] = new Array(checks.length);
    for (let i = 0; i < checks.length; i++) {
      const b = i * REPLY_PER_CHECK;
      out[i] = {
        allowed: reply[b] === 1,
        remaining: Number(reply[b + 1]),
        resetSeconds: Number(reply[b + 2]),
        retryAfterSeconds: Number(reply[b + 3]),
      };
    }
    return out;
  }

  async close(): Promise<void> {
    this.closing = true;
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect(); // not connected: just stop reconnecting
    }
  }

  private async loadScript(): Promise<void> {
    try {
      await this.redis.script("LOAD", applyScript());
      this.markUp();
    } catch (err) {
      this.markDown(`SCRIPT LOAD failed: ${(err as Error).message}`);
    }
  }

  private markUp(): void {
    if (this.up === true) return;
    this.up = true;
    this.logger.info({ store: this.where }, "rate-limit store up");
  }

  private markDown(reason: string): void {
    if (this.up === false || this.closing) return;
    this.up = false;
    this.logger.warn({ store: this.where, reason }, "rate-limit store down");
  }
}
