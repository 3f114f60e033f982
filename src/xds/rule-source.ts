// Rules from a control plane: each state-of-the-world response is the whole rule set (one RateLimitConfig
// resource per "file"), validated by rules/load.ts like a hot reload, in a child process and only for the
// resources that changed (rules/compiler.ts). A valid set is ACKed and swapped in; an invalid one is NACKed
// with its errors and the last good rules keep serving, as with a rule directory. So is an empty one
// (no resources: every limit gone) unless the operator allows it (--allow-empty-rules).
import type { Logger } from "pino";
import { compileFailure, RuleCompiler } from "../rules/compiler.js";
import { errorTotal, type LoadResult } from "../rules/load.js";
import { formatRuleError } from "../rules/model.js";
import { logLoadProblems } from "../telemetry/rule-log.js";
import type { RuleSource, RuleSourceOptions } from "../rules/source.js";
import { AdsClient } from "./ads-client.js";
import { RATE_LIMIT_CONFIG_TYPE } from "./rate-limit-config.js";
import { NEEDS_BYTES, resourceEntries, withoutUnchangedBytes, type Resource } from "./resource-entries.js";
import { xdsCredentials, type XdsSettings } from "./xds-settings.js";

/** Counts for metrics (telemetry/metrics.ts). */
interface XdsObserver {
  xdsResponse(result: "ack" | "nack"): void;
  xdsReconnect(): void;
  xdsConnected(up: boolean): void;
}

interface XdsState {
  xds: {
    server: string;
    connected: boolean;
    /** A valid rule set came from the control plane since start. */
    received: boolean;
    /** version_info of the rules in force ("" before the first). */
    version: string;
    /** Valid sets applied (ACKed), invalid ones refused (NACKed), reconnect attempts. */
    updates: number;
    rejected: number;
    reconnects: number;
    lastUpdateAt?: string;
    lastRejectedAt?: string;
    lastRejection?: string;
  };
}

/** Most errors named in one NACK; the rest are counted. */
const NACK_ERRORS = 20;

const COMPILE_WORKER = new URL("./compile-main.js", import.meta.url);

/** The NACK of a response without resources, unless allowed. */
const EMPTY_XDS_REFUSAL =
  "the response holds no RateLimitConfig resources: sluice would enforce no limits; the last good rules keep serving (give --allow-empty-rules, or SLUICE_ALLOW_EMPTY_RULES=true, to apply an empty set)";

interface XdsSourceOptions extends RuleSourceOptions {
  observer?: XdsObserver;
  /** Apply a response with no resources (no limits at all) instead of refusing it. */
  allowEmpty: boolean;
  /** Compile in a child process (the default); false: in this thread (tests). */
  threaded?: boolean;
}

export class XdsRuleSource implements RuleSource {
  readonly origin: Record<string, string>;
  private readonly client: AdsClient;
  private readonly o: XdsSourceOptions;
  private readonly logger: Logger;
  private readonly compiler: RuleCompiler<Resource[]>;
  /** The verdict on the last response compiled: an identical one (a new stream sends it again) gets it again. */
  private lastVerdict: string | undefined;
  private started = false;
  private pending: LoadResult | undefined;
  private firstWaiter: ((r: LoadResult) => void) | undefined;
  private readonly s: XdsState["xds"];

  constructor(x: XdsSettings, o: XdsSourceOptions) {
    this.o = o;
    this.compiler = new RuleCompiler<Resource[]>({
      load: o.load,
      workerUrl: o.threaded === false ? undefined : COMPILE_WORKER,
      entriesOf: (resources) => ({ entries: resourceEntries(resources), warnings: [] }),
      slim: { of: withoutUnchangedBytes, needsWhole: (err) => err.message.startsWith(NEEDS_BYTES) },
      prepare: o.prepare,
    });
    this.origin = { xds: x.target };
    this.logger = o.logger.child({ xds: x.target });
    this.s = { server: x.target, connected: false, received: false, version: "", updates: 0, rejected: 0, reconnects: 0 };
    const obs = o.observer;
    this.client = new AdsClient({
      target: x.target,
      credentials: () => xdsCredentials(x),
      serverName: x.tls?.serverName,
      node: { id: x.nodeId, metadata: x.nodeMetadata },
      typeUrl: RATE_LIMIT_CONFIG_TYPE,
      headers: x.headers,
      maxMessageBytes: x.maxMessageBytes,
      connectTimeoutMs: x.connectTimeoutMs,
      connectRetryMs: x.connectRetryMs,
      backoff: x.backoff,
      logger: this.logger,
      onResponse: (resources, version) => this.apply(resources, version),
      events: {
        connected: () => {
          this.s.connected = true;
          obs?.xdsConnected(true);
        },
        disconnected: () => {
          this.s.connected = false;
          obs?.xdsConnected(false);
        },
        acked: () => obs?.xdsResponse("ack"),
        nacked: () => obs?.xdsResponse("nack"),
        reconnecting: () => {
          this.s.reconnects++;
          obs?.xdsReconnect();
        },
      },
    });
  }

  first(forceStart: boolean): Promise<LoadResult> {
    this.client.start();
    if (forceStart) return Promise.resolve({ errors: [], warnings: [] });
    this.logger.info("waiting for the first rules from the xDS server");
    return new Promise((resolve) => (this.firstWaiter = resolve));
  }

  start(): void {
    this.started = true;
    const p = this.pending;
    this.pending = undefined;
    if (p) this.o.onLoad(p);
  }

  state(): XdsState {
    return { xds: { ...this.s } };
  }

  close(): void {
    this.client.close();
    this.compiler.close();
    // A start still waiting for its first rules ends with none.
    this.firstWaiter?.({ errors: [], warnings: [] });
    this.firstWaiter = undefined;
  }

  /** One response: the verdict the ADS client sends back (undefined = ACK). */
  private async apply(resources: Resource[], version: string): Promise<string | undefined> {
    let result: LoadResult;
    let commit = () => {};
    if (resources.length === 0 && !this.o.allowEmpty) {
      result = { errors: [{ file: "(response)", line: 0, path: "", message: EMPTY_XDS_REFUSAL }], warnings: [] };
    } else {
      try {
        const c = await this.compiler.compile(resources, this.firstWaiter !== undefined);
        if (!c) return this.accepted(this.lastVerdict, version);
        result = c.result;
        commit = c.commit;
      } catch (err) {
        result = compileFailure("(response)", err);
      }
    }
    // Lines of the YAML form mean nothing to whoever wrote the resource: the resource name and path locate it.
    for (const e of result.errors) e.line = 0;
    const at = new Date().toISOString();
    if (!result.rules) {
      const message = nackMessage(result);
      this.lastVerdict = message;
      this.s.rejected++;
      this.s.lastRejectedAt = at;
      this.s.lastRejection = message;
      this.logger.error({ version, errors: errorTotal(result) }, "rules from the xDS server refused (NACK); the last good rules keep serving");
      if (this.started) this.o.onLoad(result);
      else logLoadProblems(this.logger, this.origin, result);
      return message;
    }
    commit();
    this.lastVerdict = undefined;
    this.s.received = true;
    this.s.version = version;
    this.s.updates++;
    this.s.lastUpdateAt = at;
    this.logger.info({ version, resources: resources.length }, "rules received from the xDS server");
    if (this.firstWaiter) {
      this.firstWaiter(result);
      this.firstWaiter = undefined;
    } else if (this.started) {
      this.o.onLoad(result);
    } else {
      this.pending = result;
    }
    return undefined;
  }

  /** The same resources as the last response: its verdict again (an accepted one under the new version). */
  private accepted(verdict: string | undefined, version: string): string | undefined {
    if (verdict === undefined) this.s.version = version;
    return verdict;
  }
}

function nackMessage(result: LoadResult): string {
  const shown = result.errors.slice(0, NACK_ERRORS).map(formatRuleError);
  const more = errorTotal(result) - shown.length;
  return shown.join("; ") + (more > 0 ? `; and ${more} more` : "");
}
