// A small xDS control plane for tests: a real grpc-js server speaking ADS state of the world on a port of
// its own. It holds one snapshot (version + RateLimitConfig resources), sends it on every new stream and
// pushes each new one to the open streams, and records every DiscoveryRequest it gets (ACKs and NACKs).
import fs from "node:fs";
import path from "node:path";
import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";
import { ROOT } from "./sluice.js";
import { until } from "./wait.js";

export const RATE_LIMIT_CONFIG_TYPE = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";
/** RateLimitUnit numbers of rls_conf.proto. */
export const UNIT = { UNKNOWN: 0, SECOND: 1, MINUTE: 2, HOUR: 3, DAY: 4, MONTH: 5, YEAR: 6, WEEK: 7 } as const;

/** A RateLimitConfig as protobufjs takes it (field names as in the proto). */
export interface RateLimitConfigMsg {
  name: string;
  domain: string;
  descriptors?: DescriptorMsg[];
}
export interface DescriptorMsg {
  key: string;
  value?: string;
  rate_limit?: { unit?: number; requests_per_unit?: number; unlimited?: boolean; name?: string; replaces?: { name: string }[] };
  descriptors?: DescriptorMsg[];
  shadow_mode?: boolean;
  detailed_metric?: boolean;
  quota_mode?: boolean;
  /** google.protobuf.Struct: protobufjs's bundled Value fields are camelCase. */
  metadata?: { fields: Record<string, { stringValue?: string; numberValue?: number; boolValue?: boolean }> };
}

export interface ReceivedRequest {
  stream: number;
  version_info: string;
  response_nonce: string;
  type_url: string;
  node?: { id?: string; metadata?: { fields?: Record<string, { stringValue?: string }> }; user_agent_name?: string };
  error_detail?: { code?: number; message?: string };
  /** gRPC metadata of the stream. */
  headers: Record<string, string>;
}

export interface XdsServer {
  port: number;
  requests: ReceivedRequest[];
  /** Streams opened so far. */
  streamsOpened(): number;
  /** Sets the snapshot and sends it to every open stream; returns the nonce of the send (one per stream: the last). */
  setConfigs(version: string, configs: RateLimitConfigMsg[]): void;
  /** Sends raw resources (for resources that are not RateLimitConfigs), in a response of typeUrl. */
  setResources(version: string, resources: { type_url: string; value: Uint8Array }[], typeUrl?: string): void;
  waitForRequest(match: (r: ReceivedRequest) => boolean, timeoutMs?: number): Promise<ReceivedRequest>;
  stop(): Promise<void>;
}

export interface XdsServerOptions {
  port?: number;
  /** Server certificate; with ca, client certificates signed by it are required. */
  tls?: { cert: string; key: string; ca?: string };
}

const root = new protobuf.Root();
root.resolvePath = (_origin, target) => (target.startsWith("google/protobuf/") ? target : path.join(ROOT, "protos", target));
root.loadSync(["envoy/service/discovery/v3/discovery.proto", "ratelimit/config/ratelimit/v3/rls_conf.proto"], { keepCase: true });
root.resolveAll();
const Request = root.lookupType("envoy.service.discovery.v3.DiscoveryRequest");
const Response = root.lookupType("envoy.service.discovery.v3.DiscoveryResponse");
const Config = root.lookupType("ratelimit.config.ratelimit.v3.RateLimitConfig");

/** One RateLimitConfig as the bytes of an Any. */
export function encodeConfig(c: RateLimitConfigMsg): Uint8Array {
  return Config.encode(Config.fromObject(c)).finish();
}

export async function startXdsServer(o: XdsServerOptions = {}): Promise<XdsServer> {
  const server = new grpc.Server();
  const requests: ReceivedRequest[] = [];
  const open = new Set<grpc.ServerDuplexStream<Buffer, Buffer>>();
  let snapshot: { version: string; typeUrl: string; resources: { type_url: string; value: Uint8Array }[] } | undefined;
  let nonce = 0;
  let streams = 0;
  const send = (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
    if (!snapshot) return;
    const msg = Response.fromObject({ version_info: snapshot.version, type_url: snapshot.typeUrl, nonce: String(++nonce), resources: snapshot.resources });
    call.write(Buffer.from(Response.encode(msg).finish()));
  };
  server.register<Buffer, Buffer>(
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources",
    (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      const id = ++streams;
      open.add(call);
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(call.metadata.getMap())) headers[k] = String(v);
      let first = true;
      call.on("data", (bytes: Buffer) => {
        const r = Request.toObject(Request.decode(bytes), { defaults: true }) as Omit<ReceivedRequest, "stream" | "headers">;
        if (r.error_detail == null) delete r.error_detail;
        requests.push({ ...r, stream: id, headers });
        if (first) {
          first = false;
          send(call);
        }
      });
      const done = () => open.delete(call);
      call.on("end", () => {
        done();
        call.end();
      });
      call.on("error", done);
      call.on("cancelled", done);
    },
    (b: Buffer) => b,
    (b: Buffer) => b,
    "bidi",
  );
  const creds = o.tls
    ? grpc.ServerCredentials.createSsl(
        o.tls.ca ? fs.readFileSync(o.tls.ca) : null,
        [{ cert_chain: fs.readFileSync(o.tls.cert), private_key: fs.readFileSync(o.tls.key) }],
        o.tls.ca !== undefined,
      )
    : grpc.ServerCredentials.createInsecure();
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${o.port ?? 0}`, creds, (err, p) => (err ? reject(err) : resolve(p))),
  );
  const setResources = (version: string, resources: { type_url: string; value: Uint8Array }[], typeUrl = RATE_LIMIT_CONFIG_TYPE) => {
    snapshot = { version, typeUrl, resources };
    for (const call of open) send(call);
  };
  return {
    port,
    requests,
    streamsOpened: () => streams,
    setConfigs: (version, configs) =>
      setResources(
        version,
        configs.map((c) => ({ type_url: RATE_LIMIT_CONFIG_TYPE, value: encodeConfig(c) })),
      ),
    setResources,
    // Generous by default: what is awaited is sluice's next request, and a busy host can hold a process for seconds.
    async waitForRequest(match, timeoutMs = 30_000) {
      let hit: ReceivedRequest | undefined;
      await until(
        () => (hit = requests.find(match)) !== undefined,
        timeoutMs,
        () => `a matching DiscoveryRequest; got ${JSON.stringify(requests)}`,
        10,
      );
      return hit!;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const call of open) call.destroy();
        server.forceShutdown();
        resolve();
      }),
  };
}
