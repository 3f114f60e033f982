// A state-of-the-world subscription to one resource type over ADS
// (envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources). Each response is the
// full set of resources; the owner's verdict ACKs it (version_info and response_nonce echoed) or NACKs it
// (the last accepted version, the nonce, and error_detail naming the problem). A broken stream is reopened
// after a wait: CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL while the server cannot be reached, the
// backoff after a stream that was up. Nothing here knows what the resources mean.
import path from "node:path";
import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";
import type { Type } from "protobufjs";
import type { Logger } from "pino";
import { PROTO_DIR } from "../core/proto-dir.js";
import { Backoff, linearJitter, type BackoffSettings } from "./backoff.js";

const METHOD = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
/** google.rpc.Code INVALID_ARGUMENT: the code of every NACK. */
const INVALID_ARGUMENT = 3;
/** error_detail.message is for people; a control plane stores it, so it is kept short. */
const MAX_NACK_MESSAGE = 4096;

interface AdsClientOptions {
  /** host:port of the control plane. */
  target: string;
  /** Made at every connection attempt, so rotated certificate files are picked up; may throw (then a retry). */
  credentials(): grpc.ChannelCredentials;
  /** TLS: the name the server certificate must carry, when it is not the target's host. */
  serverName?: string;
  node: { id: string; metadata: Record<string, string> };
  typeUrl: string;
  /** Sent with the stream (CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS). */
  headers: Record<string, string>;
  /** Largest response accepted; a larger one breaks the stream (then the backoff). */
  maxMessageBytes: number;
  /** Longest wait for a connection before the attempt counts as failed. */
  connectTimeoutMs: number;
  /** Between attempts while the server cannot be reached (jittered +/- 50 %). */
  connectRetryMs: number;
  backoff: BackoffSettings;
  logger: Logger;
  /**
   * The verdict on one response: undefined accepts it (ACK), a message refuses it (NACK). Never throws.
   * Responses are judged one at a time; one that arrives meanwhile waits, replaced by a newer one.
   */
  onResponse(resources: { type_url?: string; value?: Uint8Array }[], version: string): Promise<string | undefined>;
  events?: AdsEvents;
}

interface AdsEvents {
  connected?(): void;
  disconnected?(reason: string): void;
  acked?(version: string): void;
  nacked?(version: string, message: string): void;
  /** A new attempt after a failure (not the first). */
  reconnecting?(waitMs: number): void;
}

interface Types {
  request: Type;
  response: Type;
}
let types: Types | undefined;

function discoveryTypes(): Types {
  if (!types) {
    const root = new protobuf.Root();
    root.resolvePath = (_origin, target) => (target.startsWith("google/protobuf/") ? target : path.join(PROTO_DIR, target));
    root.loadSync("envoy/service/discovery/v3/discovery.proto", { keepCase: true });
    root.resolveAll();
    types = {
      request: root.lookupType("envoy.service.discovery.v3.DiscoveryRequest"),
      response: root.lookupType("envoy.service.discovery.v3.DiscoveryResponse"),
    };
  }
  return types;
}

interface Response {
  version_info?: string;
  resources?: { type_url?: string; value?: Uint8Array }[];
  type_url?: string;
  nonce?: string;
}

export class AdsClient {
  private readonly o: AdsClientOptions;
  private readonly backoff: Backoff;
  private client: grpc.Client | undefined;
  private call: grpc.ClientDuplexStream<Buffer, Buffer> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  /** The version last ACKed: sent with every request until another is accepted (a NACK repeats it). */
  private acceptedVersion = "";
  /** A response is being judged; the latest one that came meanwhile (state of the world: older ones are moot). */
  private judging = false;
  private waiting: { call: grpc.ClientDuplexStream<Buffer, Buffer>; bytes: Buffer } | undefined;

  constructor(o: AdsClientOptions) {
    this.o = o;
    this.backoff = new Backoff(o.backoff);
  }

  start(): void {
    this.connect();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.drop();
  }

  private connect(): void {
    if (this.closed) return;
    const o = this.o;
    const options: grpc.ChannelOptions = {
      "grpc.max_receive_message_length": o.maxMessageBytes,
      "grpc.max_send_message_length": o.maxMessageBytes,
      // A control plane that vanished without a FIN is noticed; gRPC servers refuse pings more often than 5 min.
      "grpc.keepalive_time_ms": 300_000,
      "grpc.keepalive_timeout_ms": 20_000,
      // This client reconnects by itself, with the settings' waits.
      "grpc.enable_retries": 0,
    };
    if (o.serverName) options["grpc.ssl_target_name_override"] = o.serverName;
    let credentials: grpc.ChannelCredentials;
    try {
      credentials = o.credentials();
    } catch (err) {
      this.retry(`TLS files for the xDS server cannot be used: ${(err as Error).message}`, linearJitter(o.connectRetryMs));
      return;
    }
    const client = new grpc.Client(o.target, credentials, options);
    this.client = client;
    // The stream is opened at once: where the connection fails (refused, TLS), the call fails with the reason.
    const link = { ready: false };
    this.open(client, link);
    const channel = client.getChannel();
    const deadline = Date.now() + o.connectTimeoutMs;
    const watch = () => {
      if (this.client !== client) return;
      const state = channel.getConnectivityState(true);
      if (state === grpc.connectivityState.READY) {
        link.ready = true;
        o.logger.info({ server: o.target, node: o.node.id }, "connected to the xDS server");
        o.events?.connected?.();
        return;
      }
      channel.watchConnectivityState(state, deadline, (err) => {
        if (this.client !== client) return;
        if (err) this.retry(`no connection to the xDS server within ${o.connectTimeoutMs} ms`, linearJitter(o.connectRetryMs));
        else watch();
      });
    };
    watch();
  }

  private open(client: grpc.Client, link: { ready: boolean }): void {
    const o = this.o;
    const metadata = new grpc.Metadata();
    for (const [k, v] of Object.entries(o.headers)) metadata.set(k, v);
    const call = client.makeBidiStreamRequest<Buffer, Buffer>(
      METHOD,
      (b) => b,
      (b) => b,
      metadata,
    );
    this.call = call;
    let receivedAny = false;
    let ended = false;
    const end = (reason: string) => {
      if (ended || this.call !== call) return;
      ended = true;
      // A stream that delivered something worked: the next failure starts the backoff again.
      if (receivedAny) this.backoff.reset();
      // Never connected: the dial interval; a stream that was up: the backoff.
      this.retry(reason, link.ready ? this.backoff.next() : linearJitter(o.connectRetryMs));
    };
    call.on("data", (bytes: Buffer) => {
      if (this.call !== call) return; // a dropped stream's last words
      receivedAny = true;
      this.receive(call, bytes);
    });
    call.on("error", (err: grpc.ServiceError) => end(`xDS stream failed: ${err.details || err.message}`));
    call.on("end", () => end("xDS server ended the stream"));
    this.send(call, { version_info: this.acceptedVersion });
  }

  private receive(call: grpc.ClientDuplexStream<Buffer, Buffer>, bytes: Buffer): void {
    if (this.judging) {
      this.waiting = { call, bytes };
      return;
    }
    this.judging = true;
    void this.handle(call, bytes).finally(() => {
      this.judging = false;
      const next = this.waiting;
      this.waiting = undefined;
      if (next && this.call === next.call) this.receive(next.call, next.bytes);
    });
  }

  private async handle(call: grpc.ClientDuplexStream<Buffer, Buffer>, bytes: Buffer): Promise<void> {
    // grpc-js has just joined the message's frames (4 MiB: milliseconds); the decode waits a turn, so that
    // the calls waiting meanwhile are served in between.
    await new Promise((resolve) => setImmediate(resolve));
    const t = discoveryTypes().response;
    let res: Response;
    try {
      res = t.toObject(t.decode(bytes), { defaults: false }) as Response;
    } catch (err) {
      // Nothing to NACK without a nonce: a server that sends garbage gets a new stream.
      this.retry(`undecodable DiscoveryResponse: ${(err as Error).message}`, this.backoff.next());
      return;
    }
    const version = res.version_info ?? "";
    const nonce = res.nonce ?? "";
    if (res.type_url && res.type_url !== this.o.typeUrl) {
      // ADS multiplexes types: one this client never asked for is refused, its own state unchanged.
      const message = `sluice subscribes only to ${this.o.typeUrl}, not ${res.type_url}`;
      this.o.logger.error({ server: this.o.target, version, typeUrl: res.type_url }, "xDS response of another type refused (NACK)");
      this.nack(call, version, nonce, message);
      return;
    }
    let verdict: string | undefined;
    try {
      verdict = await this.o.onResponse(res.resources ?? [], version);
    } catch (err) {
      verdict = `internal error applying the resources: ${(err as Error).message}`;
    }
    if (this.call !== call) return; // the stream broke meanwhile: the next one gets the state again
    if (verdict === undefined) {
      this.acceptedVersion = version;
      this.send(call, { version_info: version, response_nonce: nonce });
      this.o.events?.acked?.(version);
    } else {
      this.nack(call, version, nonce, verdict);
    }
  }

  private nack(call: grpc.ClientDuplexStream<Buffer, Buffer>, version: string, nonce: string, message: string): void {
    const text = message.length > MAX_NACK_MESSAGE ? message.slice(0, MAX_NACK_MESSAGE - 1) + "…" : message;
    this.send(call, { version_info: this.acceptedVersion, response_nonce: nonce, error_detail: { code: INVALID_ARGUMENT, message: text } });
    this.o.events?.nacked?.(version, message);
  }

  private send(call: grpc.ClientDuplexStream<Buffer, Buffer>, fields: Record<string, unknown>): void {
    const t = discoveryTypes().request;
    const o = this.o;
    const req = t.fromObject({
      ...fields,
      node: { id: o.node.id, metadata: structOf(o.node.metadata), user_agent_name: "sluice" },
      type_url: o.typeUrl,
    });
    call.write(Buffer.from(t.encode(req).finish()));
  }

  private retry(reason: string, waitMs: number): void {
    if (this.closed) return;
    this.drop();
    const ms = Math.round(waitMs);
    this.o.logger.warn({ server: this.o.target, reason, retryInMs: ms }, "xDS server unavailable; the rules in force keep serving");
    this.o.events?.disconnected?.(reason);
    this.o.events?.reconnecting?.(ms);
    // Not unref'd: while sluice waits for its first rules, this timer is what keeps it running.
    this.timer = setTimeout(() => this.connect(), ms);
  }

  private drop(): void {
    const call = this.call;
    const client = this.client;
    this.call = undefined;
    this.client = undefined;
    call?.cancel();
    client?.close();
  }
}

/** google.protobuf.Struct with string values (the reference's node metadata); protobufjs's bundled Value is camelCase. */
function structOf(m: Record<string, string>): { fields: Record<string, { stringValue: string }> } {
  const fields: Record<string, { stringValue: string }> = {};
  for (const [k, v] of Object.entries(m)) fields[k] = { stringValue: v };
  return { fields };
}
