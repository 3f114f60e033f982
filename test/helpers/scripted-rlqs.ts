// A RateLimitQuotaService the test scripts (recording-rls.ts's sibling for RLQS): a real grpc-js server in the
// test process, put where sluice would be, so Envoy's rate_limit_quota filter is seen from its side alone. It
// records every usage report with its arrival time and raw bytes, and sends only the assignments the test
// gives it (send), when it says. Messages are read and written with sluice's own codec (src/rlqs/wire.ts).
import * as grpc from "@grpc/grpc-js";
import { decodeUsageReports, encodeResponse, type BucketAction, type UsageReports } from "../../src/rlqs/wire.js";

export interface RecordedReport extends UsageReports {
  /** Date.now() at arrival. */
  atMs: number;
  /** The message's bytes as Envoy sent them. */
  raw: Buffer;
}

export interface ScriptedRlqs {
  port: number;
  /** Every usage report, in arrival order, over all streams. */
  reports: RecordedReport[];
  /** Streams opened so far. */
  streamsOpened: number;
  /** Sends one RateLimitQuotaResponse with these actions on every open stream; the number of streams sent on. */
  send(actions: BucketAction[]): number;
  close(): Promise<void>;
}

const MAX_BUCKETS = 1000;

type Duplex = grpc.ServerDuplexStream<RecordedReport, BucketAction[]>;

const SERVICE: grpc.ServiceDefinition = {
  StreamRateLimitQuotas: {
    path: "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas",
    requestStream: true,
    responseStream: true,
    requestSerialize: () => {
      throw new Error("the scripted RLQS server only receives reports");
    },
    requestDeserialize: (raw: Buffer): RecordedReport => ({ atMs: Date.now(), raw: Buffer.from(raw), ...decodeUsageReports(raw, MAX_BUCKETS) }),
    responseSerialize: (actions: BucketAction[]) => encodeResponse(actions),
    responseDeserialize: () => {
      throw new Error("the scripted RLQS server only sends responses");
    },
  },
};

/** Starts the server on 127.0.0.1 at a free port. */
export async function startScriptedRlqs(): Promise<ScriptedRlqs> {
  const server = new grpc.Server();
  const open = new Set<Duplex>();
  const rlqs: ScriptedRlqs = {
    port: 0,
    reports: [],
    streamsOpened: 0,
    send(actions) {
      for (const call of open) call.write(actions);
      return open.size;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const call of open) call.end();
        server.tryShutdown(() => resolve());
        // Envoy reopens streams: force after a short grace.
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 1000).unref();
      }),
  };
  server.addService(SERVICE, {
    StreamRateLimitQuotas(call: Duplex) {
      rlqs.streamsOpened++;
      open.add(call);
      call.on("data", (r: RecordedReport) => rlqs.reports.push(r));
      const gone = () => open.delete(call);
      call.on("end", () => {
        gone();
        call.end();
      });
      call.on("error", gone);
      call.on("close", gone);
    },
  });
  rlqs.port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  );
  return rlqs;
}
