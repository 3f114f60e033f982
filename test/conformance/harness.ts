// sluice's gRPC server (src/server/grpc/h2/) under test, in this process: a real Limiter on a real MemoryStore behind a gate
// (test/helpers/gated-store.ts), the options every case shares, and counts from the observer.
import net from "node:net";
import pino from "pino";
import { Limiter } from "../../src/limiter/limiter.js";
import { loadRuleFiles } from "../../src/rules/load.js";
import { startH2Server } from "../../src/server/grpc/h2/server.js";
import type { CallObserver, RunningTransport, TransportOptions } from "../../src/server/grpc/grpc-contract.js";
import { GatedStore } from "../helpers/gated-store.js";
import { encodeRequest, grpcFrame } from "../../bench/lib/frame.mjs";

export const DOMAIN = "conf";
const RULES = `
domain: ${DOMAIN}
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000000}
  - key: one
    rate_limit: {unit: hour, requests_per_unit: 1}
`;

export const MAX_MESSAGE_BYTES = 4096;
export const MAX_STREAMS = 4;

export const GRPC = {
  OK: 0,
  CANCELLED: 1,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
};
export const HEALTH = { SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 };
export const RLS_SERVICE = "envoy.service.ratelimit.v3.RateLimitService";

export interface Served {
  port: number;
  transport: RunningTransport;
  store: GatedStore;
  /** Calls the observer heard of: decided ones, and the codes of failed ones. */
  decided: number;
  failed: string[];
  /** transport.shutdown(graceMs), once: later calls return the first call's result. */
  shutdown(graceMs: number): Promise<boolean>;
  /** Cleanup: opens the store gate and shuts down (unless a test did already). */
  stop(): Promise<void>;
}

export async function serve(extra: Partial<TransportOptions> = {}): Promise<Served> {
  const loaded = loadRuleFiles([{ name: "conf.yaml", text: RULES }], { mergeDomains: false });
  if (!loaded.rules) throw new Error(`conformance rules do not load: ${JSON.stringify(loaded.errors)}`);
  const store = new GatedStore();
  const limiter = new Limiter(loaded.rules, store, { denyNoteMaxEntries: 0 });
  const served = { decided: 0, failed: [] as string[] } as Served;
  const observer: CallObserver = {
    decided: () => void served.decided++,
    failed: (code) => void served.failed.push(code),
  };
  const transport = await startH2Server(limiter, {
    host: "127.0.0.1",
    port: 0,
    bounds: { maxDescriptors: 8, maxEntries: 8, maxKeyLength: 64, maxValueLength: 256 },
    maxMessageBytes: MAX_MESSAGE_BYTES,
    maxConcurrentStreams: MAX_STREAMS,
    logger: pino({ level: "silent" }),
    observer,
    ...extra,
  });
  transport.setServing(true);
  let stopped: Promise<boolean> | undefined;
  Object.assign(served, {
    port: transport.port,
    transport,
    store,
    shutdown: (graceMs: number) => (stopped ??= transport.shutdown(graceMs)),
    stop: async () => {
      store.release();
      await served.shutdown(2000);
    },
  });
  return served;
}

/** A valid RateLimitRequest for key k (the 1,000,000-an-hour limit), framed. */
export function validCall(value = "v"): Buffer {
  return grpcFrame(validRequest(value));
}

export function validRequest(value = "v"): Buffer {
  return encodeRequest(DOMAIN, [[["k", value]]]);
}

/** Bytes of an OK RateLimitResponse start with overall_code = OK (field 1, varint 1), after the 5-byte prefix. */
export function isOkResponse(data: Buffer): boolean {
  return data.length > 7 && data[0] === 0 && data.readUInt32BE(1) === data.length - 5 && data[5] === 0x08 && data[6] === 0x01;
}

/** The promise's value, or a rejection naming `what` after timeoutMs. */
export function within<T>(what: string, p: Promise<T>, timeoutMs = 10_000): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs)));
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** "ECONNREFUSED" (or another error code) when a TCP connection to the port fails; "connected" when it opens. */
export function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve("connected");
    });
    socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}
