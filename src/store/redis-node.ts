// One Redis server: the apply and refund scripts through ioredis (FCALL of the function library on
// Redis 7+, else EVALSHA; fcall.ts),
// a per-call timeout, no offline queue, and a circuit breaker. With Sentinel (connection.sentinels, see
// redis-sentinel.ts) the server is whichever master the sentinels name now: a failover is a reconnect,
// made at the sentinels' announcement (sentinel-switch.ts).
// A Cluster node is one of these too (redis-cluster.ts routes slots to them): it is told of the node's
// trouble (a lost connection, a call the node left unanswered) so that it can look at the topology at once.
import { reconnectDelay, sentinelBounds } from "./reconnect.js";
import net from "node:net";
import { Redis, ReplyError, type RedisOptions } from "ioredis";
import type { Logger } from "pino";
import { NodePermissions, type PermissionNeeds } from "./acl-check.js";
import { CircuitBreaker } from "./breaker.js";
import type { Clock } from "./clock.js";
import { ReplyWatch, StoreTimeoutError, withDeadline } from "./deadline.js";
import { failureWords, storeFailure, type FailureWords } from "./failure-words.js";
import { guardedCall, logBreakerChanges, type StoreCallObserver } from "./guarded-call.js";
import { callScript, loadScripts, type ScriptMode } from "./fcall.js";
import {
  applyScript,
  leaseArgs,
  leaseScript,
  parseApplyReply,
  parseLeaseReply,
  refundScript,
  type ScriptArgs,
  scriptArgs,
  type StoreScript,
} from "./lua-library.js";
import { ScriptErrorLog, type ScriptErrorObserver } from "./script-errors.js";
import { isEndpoint, SWITCH_SETTLE_MS, SwitchWatch, type Endpoint } from "./sentinel-switch.js";
import { StoreUnavailableError, type Check, type CheckResult, type NodeStatus, type LeaseEntry, type LeaseReply } from "./store.js";

/** Probes timed out in a row after which a silent connection is dropped and made again. */
const SILENT_PROBES = 4;

/** Script calls per socket write at most (see batchWrites). */
const MAX_BATCH = 32;

/** What the limiter does while a node is down (the log says it with the cause). */
const WHILE_DOWN = "calls are answered by each limit's failure_mode until it is back";

interface RedisNodeOptions {
  /** ioredis connection options (host, port, db, password, tls ...); see redis-options.ts. */
  connection: RedisOptions;
  timeoutMs: number;
  logger: Logger;
  breakerThreshold: number;
  probeIntervalMs: number;
  /** Pins the scripts' time instead of Redis TIME (tests of calendar boundaries). */
  clock?: Clock;
  /** Told of every script call that reached the connection (metrics): its time and whether it succeeded. */
  onCall?: StoreCallObserver;
  /**
   * Told when the node gives trouble: down (its connection closed or failed, its circuit is open), or not
   * yet known down (a call got no reply in time: a silent node, or a moment's stall).
   */
  onTrouble?: (node: RedisNode, reason: string, down: boolean) => void;
  /** Told when the node is usable again (connected, scripts loaded, or answering after trouble). */
  onUp?: (node: RedisNode) => void;
  /** What the permission check at each connect asks for (acl-check.ts); absent: the counters' commands under no prefix. */
  permissionNeeds?: PermissionNeeds;
  /** Told of every error reply to a script or command, by kind (metrics). */
  onScriptError?: ScriptErrorObserver;
}

export class RedisNode {
  /** host:port, never a URL: the URL may carry a password; with Sentinel "sentinel:NAME" (NAME = the master's). */
  readonly id: string;
  /** Sentinel: host:port of the master last connected to (status, logs). */
  private master: string | undefined;
  private readonly redis: Redis;
  private readonly logger: Logger;
  private readonly clock: Clock | undefined;
  private readonly breaker: CircuitBreaker;
  private readonly onCall: RedisNodeOptions["onCall"];
  private readonly onTrouble: RedisNodeOptions["onTrouble"];
  private readonly onUp: RedisNodeOptions["onUp"];
  /** What the user may run of what sluice sends (acl-check.ts). */
  private readonly permissions: NodePermissions;
  private readonly scriptErrors: ScriptErrorLog;
  private readonly timeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly watch: ReplyWatch;
  /** undefined until the first attempt finished; logged only when it changes. */
  private up: boolean | undefined;
  private loading: Promise<void> | undefined;
  /** How scripts are called, chosen when they are loaded at each connect (a failover may reach another version); undefined until then. */
  private mode: ScriptMode | undefined;
  private closing = false;
  /** The socket corked for this turn's script calls, if any, and how many it holds. */
  private corked: Redis["stream"] | undefined;
  private batched = 0;
  /** Probes of the open circuit that timed out in a row (see probe()). */
  private silentProbes = 0;
  /** While the node is silent (ReplyWatch.silent): counts each further timeout of silence for the breaker. */
  private silenceTimer: NodeJS.Timeout | undefined;
  /** Sentinel: +switch-master subscriptions (made in start()). */
  private switchWatch: SwitchWatch | undefined;
  /** Sentinel: the master last announced, and when (performance.now()). */
  private switchedTo: { to: Endpoint; at: number } | undefined;

  constructor(o: RedisNodeOptions) {
    this.logger = o.logger;
    this.clock = o.clock;
    this.onCall = o.onCall;
    this.onTrouble = o.onTrouble;
    this.onUp = o.onUp;
    this.timeoutMs = o.timeoutMs;
    this.connectTimeoutMs = Math.max(1000, o.timeoutMs);
    this.watch = new ReplyWatch(o.timeoutMs, () => this.silenceStarted());
    this.redis = new Redis({
      ...o.connection,
      lazyConnect: true, // start() makes the first attempt
      // Script calls are batched by batchWrites() below; auto-pipelining would only hold other commands.
      enableOfflineQueue: false, // a down Redis fails calls at once instead of queueing them
      maxRetriesPerRequest: 0, // never resend a script after a disconnect: it may have run
      // No commandTimeout: script calls are bounded by the ReplyWatch instead (see deadline.ts).
      connectTimeout: this.connectTimeoutMs,
      retryStrategy: reconnectDelay,
      ...(o.connection.sentinels ? sentinelBounds(this.connectTimeoutMs, o.timeoutMs) : {}),
    });
    this.id = o.connection.sentinels ? `sentinel:${o.connection.name}` : `${this.redis.options.host}:${this.redis.options.port}`;
    this.scriptErrors = new ScriptErrorLog(this.logger, this.id, o.onScriptError);
    this.permissions = new NodePermissions(this.logger, this.id, o.permissionNeeds ?? { keyPrefix: "", summaries: false });
    this.breaker = new CircuitBreaker({
      threshold: o.breakerThreshold,
      probeIntervalMs: o.probeIntervalMs,
      probe: () => this.probe(),
      onChange: logBreakerChanges(this.logger, this.id),
    });
    // Sentinel: a connection made soon after a switch to a server other than the announced master came
    // from a sentinel that has not heard of the switch yet. Left before its handshake (no call can be sent
    // before 'ready'); the reconnect, with its growing delay, asks the next sentinel.
    this.redis.on("connect", () => {
      const sw = this.switchedTo;
      if (!sw || performance.now() - sw.at > SWITCH_SETTLE_MS) return;
      const stream = this.redis.stream;
      if (isEndpoint(stream?.remoteAddress, stream?.remotePort, sw.to)) return;
      this.logger.info(
        { store: this.id, named: remoteAddress(stream), master: `${sw.to.host}:${sw.to.port}` },
        "a sentinel named another server than the announced master; asking again",
      );
      this.redis.disconnect(true);
    });
    this.redis.on("ready", () => {
      if (o.connection.sentinels) this.master = remoteAddress(this.redis.stream);
      this.loading = this.loadScripts();
    });
    // Without an 'error' listener ioredis errors would crash the process.
    this.redis.on("error", (err: Error) => this.markDown(failureWords(err)));
    this.redis.on("close", () => this.markDown({ reason: "connection closed", detail: "", unreachable: true }));
  }

  /** Connected with its circuit closed: calls go to the node (they may still time out). */
  get usable(): boolean {
    return this.up === true && !this.breaker.isOpen && !this.watch.silent && this.redis.status === "ready";
  }

  /** A topology change: probe an open circuit now. */
  probeNow(): void {
    this.breaker.probeNow();
  }

  /**
   * One command outside the scripts (CLUSTER NODES ...), bounded by timeoutMs; a timeout counts for the breaker.
   * `outcome`: what is left undone when it fails (logged with an error reply). Fails with sluice's words.
   */
  async command(args: string[], timeoutMs: number, outcome = "that command was not done"): Promise<unknown> {
    const [name, ...rest] = args;
    const started = performance.now();
    try {
      return await withDeadline(this.redis.call(name, ...rest), timeoutMs);
    } catch (err) {
      const what = `${name.toUpperCase()} command`;
      if (err instanceof StoreTimeoutError) this.breaker.failure(`${what}: ${failureWords(err).reason}`, started);
      if (err instanceof ReplyError) this.scriptError(what, err as Error, outcome);
      throw storeFailure(this.id, what, err);
    }
  }

  /**
   * The open circuit's probe. A node silent for SILENT_PROBES probes in a row (hung, or a black hole) has its
   * connection dropped and made again: what waits on a silent socket (each probe's PING) is bounded, and a
   * node that resumes is met on a fresh connection (ready check, scripts loaded).
   */
  private async probe(): Promise<void> {
    try {
      await withDeadline(this.redis.ping(), this.timeoutMs);
      this.silentProbes = 0;
      this.watch.heard();
    } catch (err) {
      if (err instanceof StoreTimeoutError && ++this.silentProbes >= SILENT_PROBES) {
        this.silentProbes = 0;
        this.logger.warn({ store: this.id, reason: "silent" }, "rate-limit store connection dropped");
        this.redis.disconnect(true);
      }
      throw err;
    }
  }

  async start(): Promise<void> {
    const o = this.redis.options;
    if (o.sentinels && o.name && !this.switchWatch) {
      this.switchWatch = new SwitchWatch({
        name: o.name,
        sentinels: o.sentinels.map((s) => ({ host: s.host ?? "127.0.0.1", port: s.port ?? 26379 })),
        username: o.sentinelUsername,
        password: o.sentinelPassword,
        connectTimeoutMs: this.connectTimeoutMs,
        retryStrategy: reconnectDelay,
        logger: this.logger,
        onSwitch: (to) => this.onSwitch(to),
      });
    }
    try {
      // Bounded: a lookup while every sentinel is away, or a server that accepts but never answers, would
      // hold start() for good. The connection keeps trying after this; the failure policy answers meanwhile.
      await withDeadline(this.redis.connect(), 2 * this.connectTimeoutMs);
      await (this.loading ?? this.loadScripts());
    } catch (err) {
      this.markDown(failureWords(err));
    }
  }

  /**
   * Sentinel: the master moved. A connection to any other server is left now (a demoted master may keep
   * it open for seconds, a hung one for good; see disconnectTimeout), and the new one looked up at once.
   */
  private onSwitch(to: Endpoint): void {
    this.switchedTo = { to, at: performance.now() };
    const stream = this.redis.stream;
    const status = this.redis.status;
    if ((status !== "ready" && status !== "connect") || isEndpoint(stream?.remoteAddress, stream?.remotePort, to)) return;
    this.logger.info({ store: this.id, from: remoteAddress(stream), master: `${to.host}:${to.port}` }, "sentinels switched the master");
    this.redis.disconnect(true);
  }

  state(): NodeStatus["state"] {
    if (this.breaker.isOpen) return "circuit_open";
    return this.up ? "up" : "down";
  }

  status(): NodeStatus {
    const s: NodeStatus = { id: this.id, state: this.state(), inFlight: this.inFlight };
    if (this.mode) s.scripts = this.mode;
    if (this.permissions.found) s.permissions = this.permissions.found;
    if (this.master) s.master = this.master;
    return s;
  }

  async apply(checks: Check[], dryRun: boolean): Promise<CheckResult[]> {
    const reply = await this.call("rate-limit script", applyScript(), scriptArgs(checks, this.clock?.nowMicros(), undefined, dryRun), true);
    try {
      return parseApplyReply(reply, checks);
    } catch (err) {
      throw new StoreUnavailableError(`Redis ${this.id} gave an unexpected reply: ${(err as Error).message}`);
    }
  }

  async refund(checks: Check[], results: CheckResult[]): Promise<void> {
    await this.call("refund script", refundScript(), scriptArgs(checks, this.clock?.nowMicros(), results));
  }

  async lease(entries: readonly LeaseEntry[]): Promise<LeaseReply> {
    const reply = await this.call("lease script", leaseScript(), leaseArgs(entries, this.clock?.nowMicros()));
    try {
      return parseLeaseReply(reply, entries);
    } catch (err) {
      throw new StoreUnavailableError(`Redis ${this.id} gave an unexpected reply: ${(err as Error).message}`);
    }
  }

  /** Script calls waiting for a reply (metrics). */
  get inFlight(): number {
    return this.watch.inFlight;
  }

  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.silenceTimer);
    this.switchWatch?.close();
    this.breaker.stop();
    this.watch.stop();
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect(); // not connected: just stop reconnecting
    }
  }

  /**
   * One script call (guarded-call.ts); the calls of one event-loop turn leave in one write. asking: after an
   * ASK redirection, the script goes right behind an ASKING on the same connection (Cluster).
   */
  async call(what: string, script: StoreScript, args: ScriptArgs, buffers = false, asking = false): Promise<unknown> {
    let reply: unknown;
    try {
      // (An open circuit answers for itself below: the node is then known down.)
      if (this.watch.silent && !this.breaker.isOpen) {
        const ms = this.watch.silentForMs();
        const reason = `silent: no reply for ${ms} ms, so the ${what} was not sent`;
        throw new StoreUnavailableError(`Redis ${this.id} is unreachable (${reason})`, new StoreTimeoutError(this.timeoutMs), {
          reason,
          detail: "",
          unreachable: true,
        });
      }
      reply = await guardedCall(this.id, this.breaker, this.onCall, what, () => {
        const batched = this.batchWrites();
        if (asking) this.redis.asking().catch(() => {}); // its failure fails the script behind it too
        return this.watch.watch(callScript(this.redis, this.mode ?? "evalsha", script, args, buffers), !batched);
      });
    } catch (err) {
      const cause = err instanceof StoreUnavailableError ? err.cause : undefined;
      if (cause instanceof ReplyError) {
        // A redirection is the cluster's business (redis-cluster.ts follows it), not an error of the script.
        if (!/^(MOVED|ASK) /.test((cause as Error).message)) this.scriptError(what, cause as Error, "its limits were answered by their failure_mode");
      } else {
        this.onTrouble?.(this, failureWords(err).reason, !(cause instanceof StoreTimeoutError));
      }
      throw err;
    }
    // A node marked down by a slow SCRIPT LOAD at connect is up once it answers a script.
    if (this.up !== true) this.markUp();
    return reply;
  }

  /**
   * Script calls issued in one turn of the event loop leave in one socket write: the socket is corked
   * until the loop's check phase (each call starts from its HTTP/2 stream's 'end', emitted in a tick of
   * its own, so the end of a tick would batch nothing). Unlike ioredis's auto-pipelining, a batch never waits for the previous batch's
   * replies, and no Pipeline object, extra promise or nextTick per command is made. A batch goes out
   * at MAX_BATCH calls: after a pause (GC, a busy CPU) one turn can take in a backlog of thousands of
   * calls, and Redis should start on them before the turn ends. True when the call waits in a batch
   * (its deadline starts when the batch leaves), false when it is written at once.
   */
  private batchWrites(): boolean {
    if (this.corked) {
      if (++this.batched < MAX_BATCH) return true;
      RedisNode.uncork(this);
    }
    const stream = this.redis.stream;
    if (!stream?.writable) return false;
    this.corked = stream;
    this.batched = 1;
    stream.cork();
    setImmediate(RedisNode.uncork, this);
    return true;
  }

  private static uncork(node: RedisNode): void {
    const stream = node.corked;
    if (!stream) return;
    node.corked = undefined;
    stream.uncork();
    node.watch.sent();
  }

  /** At each connect: what the user may run, then the scripts the way it allows (the library, or EVALSHA). */
  private async loadScripts(): Promise<void> {
    const functions = await this.permissions.check(this.redis, this.connectTimeoutMs);
    try {
      // Bounded like connecting: compiling the library takes longer than a check. Set even if it ends late.
      const loaded = loadScripts(this.redis, functions).then((mode) => {
        this.mode = mode;
      });
      await withDeadline(loaded, this.connectTimeoutMs);
      this.markUp();
    } catch (err) {
      const w = failureWords(err);
      this.markDown({ ...w, reason: `loading the scripts failed: ${w.reason}` });
    }
  }

  /**
   * An error reply to a script or command: counted by kind and logged (script-errors.ts). An ACL refusal the last
   * check did not foresee (the user changed while connected) has the permissions checked again.
   */
  private scriptError(what: string, err: Error, outcome: string): void {
    const kind = this.scriptErrors.report(what, err.message, this.permissions.missing, outcome);
    if (kind.code === "NOPERM" && !this.closing && this.permissions.recheckFor(kind.command)) void this.permissions.check(this.redis, this.connectTimeoutMs);
  }

  /**
   * A call timed out on a silent node: until its next reply, calls are answered by policy without being sent,
   * so the breaker would see no more of them; each further timeout of silence counts as one instead.
   */
  private silenceStarted(): void {
    clearTimeout(this.silenceTimer);
    const tick = (): void => {
      this.silenceTimer = undefined;
      if (!this.watch.silent || this.closing || this.breaker.isOpen) return;
      this.breaker.stillSilent(`no reply for ${this.watch.silentForMs()} ms`);
      this.silenceTimer = setTimeout(tick, this.timeoutMs);
      this.silenceTimer.unref();
    };
    this.silenceTimer = setTimeout(tick, this.timeoutMs);
    this.silenceTimer.unref();
  }

  private markUp(): void {
    this.watch.heard();
    this.breaker.reset("connected");
    if (this.up === true) return;
    this.up = true;
    this.onUp?.(this);
    this.logger.info({ store: this.id, ...(this.master ? { master: this.master } : {}) }, "rate-limit store up");
  }

  private markDown(w: FailureWords): void {
    if (this.closing) return;
    this.onTrouble?.(this, w.reason, true);
    if (this.up === false) return;
    this.up = false;
    this.logger.warn({ store: this.id, reason: w.reason, outcome: WHILE_DOWN, ...(w.detail ? { detail: w.detail } : {}) }, "rate-limit store down");
  }
}

/** host:port of the peer of a connected socket ([v6]:port); undefined when not connected. */
function remoteAddress(stream: Redis["stream"] | undefined): string | undefined {
  const host = stream?.remoteAddress;
  if (!host || !stream.remotePort) return undefined;
  return `${net.isIPv6(host) ? `[${host}]` : host}:${stream.remotePort}`;
}
