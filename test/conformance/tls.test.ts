// Conformance, TLS and mTLS (server/tls.ts's ServerTls, certificates made by openssl at test time):
// who gets in, and certificate files replaced on disk reach new connections while old ones keep going.
import { X509Certificate } from "node:crypto";
import fs from "node:fs";
import type http2 from "node:http2";
import type { TLSSocket } from "node:tls";
import * as grpc from "@grpc/grpc-js";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serverTls, type ServerTls } from "../../src/server/grpc/tls.js";
import { certFactory, read, type CertFactory, type Pem } from "../helpers/certs.js";
import { descriptor, OK, rlsClient } from "../helpers/grpc-client.js";
import { closeSession, h2Call, h2Session } from "../helpers/h2-call.js";
import { DOMAIN, GRPC, isOkResponse, serve, validCall, type Served } from "./harness.js";
import { sleep } from "../helpers/wait.js";

const RELOAD_MS = 50;

let certs: CertFactory;
let ca: Pem;
let otherCa: Pem;
let serverA: Pem;
let serverB: Pem;
let client: Pem;
let strangerClient: Pem;

beforeAll(() => {
  certs = certFactory();
  ca = certs.ca("ca");
  otherCa = certs.ca("other-ca");
  serverA = certs.issue(ca, "server-a", "server");
  serverB = certs.issue(ca, "server-b", "server");
  client = certs.issue(ca, "client", "client");
  strangerClient = certs.issue(otherCa, "stranger", "client");
});

/** One call on a fresh grpc-js channel: 0 = OK, else the gRPC code. */
async function callWith(port: number, creds: grpc.ChannelCredentials): Promise<number> {
  const c = rlsClient(port, creds);
  try {
    const r = await c.shouldRateLimit({ domain: DOMAIN, descriptors: [descriptor({ k: "tls" })] }, 5000);
    expect(r.overall_code).toBe(OK);
    return GRPC.OK;
  } catch (err) {
    return (err as grpc.ServiceError).code;
  } finally {
    c.close();
  }
}

const ssl = (clientCert?: Pem) =>
  clientCert ? grpc.credentials.createSsl(read(ca.cert), read(clientCert.key), read(clientCert.cert)) : grpc.credentials.createSsl(read(ca.cert));

let fileCount = 0;
/** Server certificate files in a place the test may rewrite. */
function liveFiles(server: Pem, clientCa?: Pem) {
  const n = ++fileCount;
  const f = { certFile: `${certs.dir}/live-${n}.pem`, keyFile: `${certs.dir}/live-${n}.key`, caFile: clientCa ? `${certs.dir}/live-${n}-ca.pem` : undefined };
  fs.copyFileSync(server.cert, f.certFile);
  fs.copyFileSync(server.key, f.keyFile);
  if (clientCa) fs.copyFileSync(clientCa.cert, f.caFile!);
  return f;
}

async function serveTls(files: ReturnType<typeof liveFiles>): Promise<{ s: Served; tls: ServerTls }> {
  const tls = serverTls({ ...files, reloadMs: RELOAD_MS }, pino({ level: "silent" }));
  try {
    return { s: await serve({ tls }), tls };
  } catch (err) {
    tls.close();
    throw err;
  }
}

/** A TLS session trusting `ca`; resolves once connected, with the SHA-256 fingerprint the server showed. */
async function tlsSession(port: number): Promise<{ session: http2.ClientHttp2Session; fingerprint: string }> {
  const session = h2Session(port, { ca: read(ca.cert), servername: "localhost" }, "https");
  await new Promise<void>((resolve, reject) => {
    session.once("connect", () => resolve());
    session.once("error", reject);
  });
  return { session, fingerprint: (session.socket as TLSSocket).getPeerCertificate().fingerprint256 };
}

const fingerprintOf = (pem: Pem) => new X509Certificate(read(pem.cert)).fingerprint256;

describe("TLS and mTLS", () => {
  describe("TLS", () => {
    let s: Served;
    let tls: ServerTls;
    let files: ReturnType<typeof liveFiles>;
    beforeAll(async () => {
      files = liveFiles(serverA);
      ({ s, tls } = await serveTls(files));
    });
    afterAll(async () => {
      await s?.stop();
      tls?.close();
    });

    it("a client trusting the CA is served; a plaintext client is not", async () => {
      expect(await callWith(s.port, ssl())).toBe(GRPC.OK);
      expect(await callWith(s.port, grpc.credentials.createInsecure())).toBe(GRPC.UNAVAILABLE);
    });

    it("certificate reload: replaced files reach a new connection; the open connection keeps working", async () => {
      const old = await tlsSession(s.port);
      try {
        expect(old.fingerprint).toBe(fingerprintOf(serverA));
        expect(isOkResponse((await h2Call(old.session, { body: validCall("before") }).closed).data)).toBe(true);

        fs.copyFileSync(serverB.key, files.keyFile);
        fs.copyFileSync(serverB.cert, files.certFile);
        let fresh = await tlsSession(s.port);
        const deadline = Date.now() + 10_000;
        while (fresh.fingerprint !== fingerprintOf(serverB) && Date.now() < deadline) {
          await closeSession(fresh.session);
          await sleep(RELOAD_MS);
          fresh = await tlsSession(s.port);
        }
        expect(fresh.fingerprint).toBe(fingerprintOf(serverB));
        expect(isOkResponse((await h2Call(fresh.session, { body: validCall("new") }).closed).data)).toBe(true);
        await closeSession(fresh.session);

        // The connection made before the reload: same session, still answered.
        expect(old.session.closed || old.session.destroyed).toBe(false);
        const again = await h2Call(old.session, { body: validCall("after") }).closed;
        expect([again.grpcStatus, isOkResponse(again.data)]).toEqual([GRPC.OK, true]);
      } finally {
        await closeSession(old.session);
      }
    });
  });

  describe("mTLS", () => {
    let s: Served;
    let tls: ServerTls;
    beforeAll(async () => {
      ({ s, tls } = await serveTls(liveFiles(serverA, ca)));
    });
    afterAll(async () => {
      await s?.stop();
      tls?.close();
    });

    it("a client certificate from the trusted CA is served; none, or one from another CA, is refused", async () => {
      expect(await callWith(s.port, ssl(client))).toBe(GRPC.OK);
      expect(await callWith(s.port, ssl())).toBe(GRPC.UNAVAILABLE);
      expect(await callWith(s.port, ssl(strangerClient))).toBe(GRPC.UNAVAILABLE);
      expect(s.decided).toBe(1);
    });
  });
});
