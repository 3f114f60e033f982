// gRPC over TLS and mTLS with certificates made by openssl at test time; certificate files are
// reloaded when they change, and a change that does not load leaves the old ones serving.
import fs from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { certFactory, read, type CertFactory, type Pem } from "../helpers/certs.js";
import { descriptor, OK, rlsClient } from "../helpers/grpc-client.js";
import { ruleDir, runCli, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { until } from "../helpers/wait.js";

const RULES = `
domain: tls
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000}
`;
const UNAVAILABLE = 14;

let certs: CertFactory;
let caA: Pem;
let caB: Pem;
let serverA: Pem;
let clientA: Pem;
let clientB: Pem;
let rules: string;

beforeAll(() => {
  certs = certFactory();
  caA = certs.ca("ca-a");
  caB = certs.ca("ca-b");
  serverA = certs.issue(caA, "server-a", "server");
  clientA = certs.issue(caA, "client-a", "client");
  clientB = certs.issue(caB, "client-b", "client");
  rules = ruleDir({ "rules.yaml": RULES });
});

/** One call on a fresh channel (a new TLS handshake); resolves with the gRPC code (0 = OK). */
async function callWith(port: number, creds: grpc.ChannelCredentials): Promise<number> {
  const client = rlsClient(port, creds);
  try {
    const r = await client.shouldRateLimit({ domain: "tls", descriptors: [descriptor({ k: "v" })] }, 3000);
    expect(r.overall_code).toBe(OK);
    return 0;
  } catch (err) {
    return (err as grpc.ServiceError).code;
  } finally {
    client.close();
  }
}

const trusting = (ca: Pem, clientCert?: Pem) =>
  clientCert ? grpc.credentials.createSsl(read(ca.cert), read(clientCert.key), read(clientCert.cert)) : grpc.credentials.createSsl(read(ca.cert));

/** Copies of the given PEMs in files sluice watches (so the test can replace them). */
function liveFiles(name: string, server: Pem, clientCa?: Pem) {
  const f = { cert: `${certs.dir}/${name}-live.pem`, key: `${certs.dir}/${name}-live.key`, ca: `${certs.dir}/${name}-live-ca.pem` };
  fs.copyFileSync(server.cert, f.cert);
  fs.copyFileSync(server.key, f.key);
  if (clientCa) fs.copyFileSync(clientCa.cert, f.ca);
  return f;
}

describe("TLS", () => {
  let sluice: SluiceProcess;
  beforeAll(async () => {
    const f = liveFiles("tls", serverA);
    sluice = await startSluice(["--config", rules, "--tls-cert", f.cert, "--tls-key", f.key]);
  });
  afterAll(async () => {
    expect(await sluice?.stop()).toBe(0);
  });

  it("logs tls mode, answers a client that trusts its CA, refuses plaintext and an untrusting client", async () => {
    expect(sluice.logs.some((l) => /"msg":"listening"/.test(l) && /"tls":"tls"/.test(l))).toBe(true);
    expect(await callWith(sluice.port, trusting(caA))).toBe(0);
    expect(await callWith(sluice.port, grpc.credentials.createInsecure())).toBe(UNAVAILABLE);
    expect(await callWith(sluice.port, trusting(caB))).toBe(UNAVAILABLE);
  });
});

describe("mTLS", () => {
  let sluice: SluiceProcess;
  let files: ReturnType<typeof liveFiles>;
  beforeAll(async () => {
    files = liveFiles("mtls", serverA, caA);
    sluice = await startSluice(["--config", rules, "--tls-cert", files.cert, "--tls-key", files.key, "--tls-ca", files.ca], {
      SLUICE_TLS_RELOAD_MS: "100",
    });
  });
  afterAll(async () => {
    expect(await sluice?.stop()).toBe(0);
  });

  it("a client certificate from the trusted CA passes; none, or one from another CA, fails", async () => {
    expect(sluice.logs.some((l) => /"tls":"mtls"/.test(l))).toBe(true);
    expect(await callWith(sluice.port, trusting(caA, clientA))).toBe(0);
    expect(await callWith(sluice.port, trusting(caA))).toBe(UNAVAILABLE);
    expect(await callWith(sluice.port, trusting(caA, clientB))).toBe(UNAVAILABLE);
  });

  it("a change that does not load (key of another certificate) is logged and the old certificates keep serving", async () => {
    fs.copyFileSync(clientA.key, files.key); // a valid key, but not the certificate's
    await until(() => sluice.logs.some((l) => /TLS certificate reload failed/.test(l)), 10_000, "the reload failure logged", 100);
    const line = sluice.logs.find((l) => /TLS certificate reload failed/.test(l))!;
    expect(JSON.parse(line).reason).toMatch(/do not load/);
    expect(line).not.toContain("PRIVATE KEY");
    expect(await callWith(sluice.port, trusting(caA, clientA))).toBe(0);
  });

  it("replaced files are picked up without a restart: new server certificate and client CA", async () => {
    const serverB = certs.issue(caB, "server-b", "server");
    // Write the key first, then the certificate and the CA: in between, the set does not load.
    fs.copyFileSync(serverB.key, files.key);
    fs.copyFileSync(serverB.cert, files.cert);
    fs.copyFileSync(caB.cert, files.ca);
    await until(async () => (await callWith(sluice.port, trusting(caB, clientB))) === 0, 10_000, "a call trusting the new certificates", 100);
    expect(sluice.logs.some((l) => /TLS certificates reloaded/.test(l))).toBe(true);
    expect(await callWith(sluice.port, trusting(caA, clientA))).toBe(UNAVAILABLE); // old server CA
    expect(await callWith(sluice.port, trusting(caB, clientA))).toBe(UNAVAILABLE); // old client CA
    expect(sluice.proc.exitCode).toBeNull();
  });
});

describe("TLS configuration errors", () => {
  it("a missing file is a usage error naming it", () => {
    const r = runCli(["serve", "--port", "0", "--config", rules, "--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("cannot read TLS certificate /nonexistent/cert.pem: ENOENT");
  });

  it("a key that does not match the certificate is refused at start", () => {
    const r = runCli(["serve", "--port", "0", "--config", rules, "--tls-cert", serverA.cert, "--tls-key", clientA.key]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/do not load: .*key values mismatch/);
  });
});
