// What can be checked of the Docker side without a Docker engine (there is none here): the files parse, point
// at each other (service names, ports, mounted paths), pin their images, and the image gets what sluice reads
// at run time. The image's HEALTHCHECK command and the Kubernetes probes run against a real sluice.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parse } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isHealthService } from "../../src/server/grpc/grpc-contract.js";
import { serveSettings } from "../../src/settings/settings.js";
import { adminPaths, dockerfileLines, documentedVariables, imageEnv, imageHealthcheck, manifestFiles, manifestObjects, read } from "../helpers/deploy-files.js";
import { EnvoyEdge } from "../helpers/envoy-actions.js";
import { freePort } from "../helpers/ports.js";
import { startRedis, type RedisProcess } from "../helpers/redis-server.js";
import { ROOT, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { track } from "../helpers/children.js";

const compose = parse(read("docker-compose.yml"));
const services = compose.services;
const edge = new EnvoyEdge();
const defaults = serveSettings([], {});
/** sluice's settings in the compose service: the image's ENV, then the service's environment. */
const composeSluice = serveSettings([], { ...imageEnv(), ...services.sluice.environment });

/** "./x:/y:ro" -> { host: "./x", container: "/y" } */
function mounts(service: { volumes?: string[] }) {
  return (service.volumes ?? []).map((v) => {
    const [host, container] = v.split(":");
    return { host, container };
  });
}

describe("docker-compose.yml", () => {
  it("has envoy, sluice, redis and the demo app, with every image pinned to a version", () => {
    expect(Object.keys(services).sort()).toEqual(["app", "envoy", "grafana", "prometheus", "redis", "sluice"]);
    expect(services.sluice.build).toBe(".");
    for (const name of ["envoy", "redis", "app", "prometheus", "grafana"]) {
      expect(services[name].image, name).toMatch(/^[\w./-]+:v?\d+\.\d+\.\d+(-[\w.-]+)?$/);
    }
    expect(services.envoy.image).toMatch(/^envoyproxy\/envoy:v1\.\d+\.\d+$/);
  });

  it("every Node image is the Node major package.json requires", () => {
    const major = /^>=(\d+)$/.exec(JSON.parse(read("package.json")).engines.node)![1];
    const nodeImages = Object.entries(services).filter(([, s]: [string, any]) => /^node:/.test(s.image ?? ""));
    expect(nodeImages.map(([name]) => name)).toEqual(["app"]);
    for (const [name, s] of nodeImages as [string, any][]) expect(s.image, name).toMatch(new RegExp(`^node:${major}\\.\\d+\\.\\d+-bookworm-slim$`));
    // The same image the Dockerfile builds sluice on.
    expect(
      dockerfileLines()
        .filter((l) => l.startsWith("FROM "))
        .map((l) => l.split(/\s+/)[1]),
    ).toContain(services.app.image);
  });

  it("envoy serves envoy/envoy.yaml on port 10000", () => {
    const config = services.envoy.command[services.envoy.command.indexOf("-c") + 1];
    expect(mounts(services.envoy)).toContainEqual({ host: "./envoy/envoy.yaml", container: config });
    expect(services.envoy.ports).toContain("10000:10000");
    expect(edge.raw.static_resources.listeners[0].address.socket_address.port_value).toBe(10000);
  });

  it("envoy's clusters reach the sluice and app services on the ports they listen on", () => {
    const sluice = edge.clusterAddress("sluice");
    // The Kubernetes headless Service's name, which the compose service carries as an alias.
    expect(sluice.address).toBe("sluice-headless");
    expect(services.sluice.networks.default.aliases).toContain(sluice.address);
    expect(sluice.port).toBe(Number(services.sluice.environment.SLUICE_PORT));
    expect(sluice.port).toBe(defaults.port);
    const app = edge.clusterAddress("app");
    expect(app.address).toBe("app");
    expect(app.port).toBe(Number(services.app.environment.PORT));
  });

  it("sluice's environment names only variables sluice reads (the flag table of docs/configuration.md, held to the code)", () => {
    const known = documentedVariables();
    for (const name of Object.keys(services.sluice.environment)) expect(known, name).toContain(name);
  });

  it("sluice reads the mounted ./config and counts in the redis service", () => {
    expect(mounts(services.sluice)).toContainEqual({ host: "./config", container: services.sluice.environment.SLUICE_CONFIG });
    expect(new URL(services.sluice.environment.SLUICE_REDIS).hostname).toBe("redis");
    expect(services.sluice.depends_on.redis.condition).toBe("service_healthy");
  });

  it("envoy starts once sluice is healthy (the image's HEALTHCHECK), so no request passes uncounted", () => {
    expect(services.envoy.depends_on.sluice.condition).toBe("service_healthy");
  });

  it("the demo app runs demo/upstream.mjs from the mounted ./demo", () => {
    const script = services.app.command.at(-1);
    const mount = mounts(services.app).find((m) => script.startsWith(m.container + "/"))!;
    expect(mount.host).toBe("./demo");
    expect(script.slice(mount.container.length)).toBe("/upstream.mjs");
  });
});

describe("docker-compose.yml: Prometheus and Grafana", () => {
  const prometheusConfig = mounts(services.prometheus).find((m) => m.container === "/etc/prometheus/prometheus.yml")!;
  const prometheus = parse(read(prometheusConfig.host));

  it("Prometheus reads deploy/compose/prometheus.yml where its image looks for it", () => {
    expect(prometheusConfig.host).toBe("./deploy/compose/prometheus.yml");
    expect(services.prometheus.command).toBeUndefined(); // the image's arguments name that path
  });

  it("scrapes sluice's admin port, which the image opens beyond loopback, at sluice's /metrics", () => {
    const jobs = prometheus.scrape_configs.filter((j: any) => j.job_name === "sluice");
    expect(jobs.length).toBe(1);
    const targets: string[] = jobs[0].static_configs.flatMap((c: any) => c.targets);
    expect(targets).toEqual([`sluice:${composeSluice.adminPort}`]);
    expect(services.sluice).toBeDefined();
    expect(composeSluice.adminHost).toBe("0.0.0.0");
    // Prometheus asks for sluice:8080: the admin port answers to that name (any other gets 421).
    expect(composeSluice.adminAccess.allowedHosts).toEqual([targets[0].split(":")[0]]);
    expect(adminPaths()).toContain(jobs[0].metrics_path);
    expect(jobs[0].metrics_path).toBe("/metrics");
  });

  it("Grafana's provisioning directory (a data source and a dashboard provider) is mounted where its image reads it", () => {
    const provisioning = mounts(services.grafana).find((m) => m.container === "/etc/grafana/provisioning")!;
    expect(provisioning.host).toBe("./deploy/compose/grafana/provisioning");
    for (const sub of ["datasources", "dashboards"]) {
      const files = readdirSync(path.join(ROOT, provisioning.host, sub));
      expect(files.length, sub).toBeGreaterThan(0);
      for (const f of files) expect(parse(read(`${provisioning.host}/${sub}/${f}`)).apiVersion, f).toBe(1);
    }
  });

  it("its data source is the compose Prometheus, the default one, which the dashboard's datasource variable picks", () => {
    const { datasources } = parse(read("deploy/compose/grafana/provisioning/datasources/prometheus.yaml"));
    expect(datasources.length).toBe(1);
    const url = new URL(datasources[0].url);
    expect(url.hostname).toBe("prometheus");
    expect(services.prometheus.ports).toContain(`127.0.0.1:${url.port}:${url.port}`);
    expect(datasources[0].type).toBe("prometheus");
    expect(datasources[0].isDefault).toBe(true);
    const dashboard = JSON.parse(read("grafana/sluice.json"));
    const variable = dashboard.templating.list.find((v: any) => v.type === "datasource");
    expect(variable.query).toBe(datasources[0].type);
  });

  it("its dashboard provider serves the mounted ./grafana, which holds grafana/sluice.json", () => {
    const { providers } = parse(read("deploy/compose/grafana/provisioning/dashboards/sluice.yaml"));
    expect(providers.length).toBe(1);
    expect(providers[0].type).toBe("file");
    const dashboards = mounts(services.grafana).find((m) => m.container === providers[0].options.path)!;
    expect(dashboards.host).toBe("./grafana");
    expect(existsSync(path.join(ROOT, dashboards.host, "sluice.json"))).toBe(true);
    const home = services.grafana.environment.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH;
    expect(home).toBe(`${providers[0].options.path}/sluice.json`);
  });

  it("Prometheus and Grafana are published on the host's loopback only", () => {
    for (const name of ["prometheus", "grafana"]) {
      for (const p of services[name].ports) expect(p, name).toMatch(/^127\.0\.0\.1:/);
    }
  });
});

describe("envoy/envoy.yaml", () => {
  const rl = edge.rateLimitFilter;

  it("asks sluice over gRPC (HTTP/2, v3) for domain edge, failing open, with draft-03 X-RateLimit headers", () => {
    expect(rl.domain).toBe("edge");
    expect(rl.failure_mode_deny).toBe(false);
    expect(rl.enable_x_ratelimit_headers).toBe("DRAFT_VERSION_03");
    expect(rl.rate_limited_as_resource_exhausted).toBe(true);
    expect(rl.rate_limit_service.transport_api_version).toBe("V3");
    expect(rl.rate_limit_service.grpc_service.envoy_grpc.cluster_name).toBe("sluice");
    const options = edge.clusterAddress("sluice").cluster.typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
    expect(options["@type"]).toBe("type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions");
    // Envoy sends no more calls on a connection than sluice's own limit (a cold burst would otherwise be refused).
    expect(options.explicit_http_config).toEqual({ http2_protocol_options: { max_concurrent_streams: serveSettings([], {}).maxConcurrentStreams } });
  });

  it("bounds what it holds for sluice (circuit breakers) and health-checks each host over gRPC health", () => {
    const { cluster } = edge.clusterAddress("sluice");
    const [t] = cluster.circuit_breakers.thresholds;
    expect(cluster.circuit_breakers.thresholds.length).toBe(1);
    expect(t.priority).toBe("DEFAULT");
    for (const k of ["max_connections", "max_pending_requests", "max_requests"]) expect(t[k], k).toBeGreaterThan(0);
    expect(t.max_retries).toBe(0); // a rate-limit call is not worth a retry: the filter's failure mode answers
    const [h] = cluster.health_checks;
    expect(cluster.health_checks.length).toBe(1);
    // A service name sluice's gRPC health knows (transports answer NOT_FOUND to others).
    expect(isHealthService(h.grpc_health_check.service_name)).toBe(true);
    expect(h.grpc_health_check.service_name).not.toBe("");
    for (const k of ["timeout", "interval"]) expect(h[k], k).toMatch(/^\d+s$/);
    expect(h.unhealthy_threshold).toBeGreaterThan(0);
    expect(h.healthy_threshold).toBeGreaterThan(0);
  });

  it("waits longer than sluice's store timeout, so that sluice's answer decides when Redis is slow", () => {
    const m = /^(\d+(?:\.\d+)?)s$/.exec(rl.timeout);
    expect(m).not.toBeNull();
    expect(Number(m![1]) * 1000).toBeGreaterThan(defaults.storeTimeoutMs);
  });

  it("counts the TCP peer, never a client-sent x-forwarded-for, and routes on the normalized path", () => {
    expect(edge.hcm.use_remote_address).toBe(true);
    expect(edge.hcm.xff_num_trusted_hops).toBeUndefined();
    expect(edge.hcm.normalize_path).toBe(true);
    expect(edge.hcm.merge_slashes).toBe(true);
  });
});

describe("Dockerfile", () => {
  const lines = dockerfileLines();
  const stages: string[][] = [];
  for (const l of lines) {
    if (l.startsWith("FROM ")) stages.push([l]);
    else stages.at(-1)!.push(l);
  }
  const final = stages.at(-1)!;
  const files: string[] = JSON.parse(read("package.json")).files;

  it("builds in one stage and runs from a second one, both on a pinned image of the Node major package.json requires", () => {
    const major = /^>=(\d+)$/.exec(JSON.parse(read("package.json")).engines.node)![1];
    expect(stages.length).toBe(2);
    for (const s of stages) expect(s[0]).toMatch(new RegExp(`^FROM node:${major}\\.\\d+\\.\\d+-bookworm-slim( AS \\w+)?$`));
    expect(stages[0].some((l) => /^RUN npm run build$/.test(l))).toBe(true);
  });

  it("installs production dependencies only, without running tsc (prepare)", () => {
    const install = final.filter((l) => l.startsWith("RUN npm"));
    expect(install.length).toBe(1);
    expect(install[0]).toMatch(/npm ci --omit=dev --ignore-scripts/);
    expect(final.some((l) => /\b(src|tsconfig\.json)\b/.test(l) && l.startsWith("COPY"))).toBe(false);
  });

  it("copies what sluice reads at run time (package.json files: dist, protos, lua, config)", () => {
    const copied = final.filter((l) => l.startsWith("COPY ")).map((l) => l.split(/\s+/).at(-1)!.replace(/^\.\//, ""));
    for (const f of files) expect(copied, f).toContain(f);
    expect(final).toContain("COPY --from=build /app/dist ./dist");
  });

  it("runs `serve` as the non-root node user on sluice's gRPC and admin ports", () => {
    expect(final).toContain("USER node");
    expect(final).toContain(`EXPOSE ${defaults.port} ${defaults.adminPort}`);
    expect(final.at(-1)).toBe('CMD ["node", "dist/bin.js", "serve"]');
  });

  it("keeps the admin port on loopback: a deployment that probes or scrapes it from outside names the address", () => {
    expect(serveSettings([], imageEnv()).adminHost).toBe("127.0.0.1");
    expect(defaults.adminHost).toBe("127.0.0.1");
  });

  it("has a HEALTHCHECK run by node itself (the image has no curl or wget), bounded in time", () => {
    const { options, command } = imageHealthcheck();
    expect(command.slice(0, 2)).toEqual(["node", "-e"]);
    for (const o of ["interval", "timeout", "start-period", "retries"]) expect(options[o], o).toBeDefined();
    expect(command[2]).toContain("AbortSignal.timeout(");
    expect(command[2]).toContain("/readyz");
  });

  it(".dockerignore keeps local build state out of the context", () => {
    const ignored = read(".dockerignore")
      .split("\n")
      .map((l) => l.trim());
    for (const p of ["node_modules", "dist", ".git"]) expect(ignored).toContain(p);
  });
});

describe("demo/upstream.mjs", () => {
  it("answers 200 with a JSON echo", async () => {
    const port = await freePort();
    const proc = track(
      spawn(process.execPath, [path.join(ROOT, "demo/upstream.mjs")], {
        env: { ...process.env, PORT: String(port) },
        stdio: ["ignore", "pipe", "inherit"],
      }),
    );
    try {
      await new Promise<void>((resolve, reject) => {
        proc.stdout!.on("data", (d: Buffer) => d.toString().includes("listening") && resolve());
        proc.on("exit", (code) => reject(new Error(`exited with ${code}`)));
      });
      const res = await fetch(`http://127.0.0.1:${port}/orders?x=1`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(await res.json()).toEqual({ ok: true, method: "GET", path: "/orders?x=1" });
    } finally {
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGTERM");
      await exited;
    }
  });
});

/** Runs the image's HEALTHCHECK command as Docker would in the container: the image's environment plus `env`. */
function runHealthcheck(env: Record<string, string>): Promise<number | null> {
  const [cmd, ...args] = imageHealthcheck().command;
  const proc = track(spawn(cmd === "node" ? process.execPath : cmd, args, { env: { ...process.env, ...imageEnv(), ...env }, stdio: "ignore" }));
  return new Promise((resolve) => proc.on("exit", (code) => resolve(code)));
}

describe("the image's HEALTHCHECK against a real sluice started as the image starts it", () => {
  let sluice: SluiceProcess;
  let adminPort: number;

  beforeAll(async () => {
    adminPort = await freePort();
    sluice = await startSluice(["--admin-port", String(adminPort)], { ...imageEnv(), SLUICE_ADMIN_PORT: String(adminPort) });
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it("binds the admin port on loopback and the check passes while sluice serves", async () => {
    const listening = await sluice.waitForLog((l) => l.msg === "listening");
    expect(listening.adminHost).toBe("127.0.0.1");
    expect(await runHealthcheck({ SLUICE_ADMIN_PORT: String(adminPort) })).toBe(0);
  });

  it("fails when nothing answers on the admin port", async () => {
    expect(await sluice.stop()).toBe(0);
    expect(await runHealthcheck({ SLUICE_ADMIN_PORT: String(adminPort) })).toBe(1);
  });
});

describe("deploy/kubernetes: sluice started with the Deployment's environment answers its probes and scrapes", () => {
  const objects = manifestFiles().flatMap(manifestObjects);
  const deployment = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "sluice")!;
  const container = deployment.spec.template.spec.containers[0];
  const monitor = objects.find((o) => o.kind === "ServiceMonitor")!;
  let redis: RedisProcess;
  let sluice: SluiceProcess;

  beforeAll(async () => {
    redis = await startRedis();
    const env: Record<string, string> = { ...imageEnv() };
    for (const e of container.env) env[e.name] = e.value;
    // Flags win over the environment: this machine's rule directory, Redis and free ports instead of the pod's.
    sluice = await startSluice(["--config", path.join(ROOT, "config"), "--redis", redis.url], env);
  });
  afterAll(async () => {
    await sluice?.stop();
    await redis?.stop();
  });

  it("each probe's path answers 200 on the admin port", async () => {
    for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
      const res = await fetch(`http://127.0.0.1:${sluice.adminPort}${container[probe].httpGet.path}`);
      expect(res.status, probe).toBe(200);
    }
  });

  it("the ServiceMonitor's path serves Prometheus text with sluice's metrics", async () => {
    const res = await fetch(`http://127.0.0.1:${sluice.adminPort}${monitor.spec.endpoints[0].path}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(await res.text()).toMatch(/^sluice_config_rules\{domain="edge"\} \d+$/m);
  });
});

describe("the image's /bin/ratelimit, the reference image's command", () => {
  it("is copied to /bin/ratelimit, executable, and runs sluice serve from /app with the environment's settings", async () => {
    expect(dockerfileLines()).toContain("COPY --chmod=755 deploy/image/ratelimit /bin/ratelimit");
    expect(read(".dockerignore").split("\n")).toContain("!deploy/image");
    // The script as the image runs it, with the image's /app pointed at this checkout.
    const dir = mkdtempSync(path.join(os.tmpdir(), "sluice-shim-"));
    const script = path.join(dir, "ratelimit");
    writeFileSync(script, read("deploy/image/ratelimit").replaceAll("/app/", `${ROOT}/`), { mode: 0o755 });
    const [httpPort, grpcPort, adminPort] = [await freePort(), await freePort(), await freePort()];
    const env = {
      ...process.env,
      ...imageEnv(),
      PORT: String(httpPort),
      GRPC_PORT: String(grpcPort),
      SLUICE_ADMIN_PORT: String(adminPort),
      RUNTIME_ROOT: ROOT,
      RUNTIME_SUBDIRECTORY: ".",
    };
    const proc = track(spawn(script, [], { env, stdio: ["ignore", "pipe", "pipe"] }));
    try {
      await new Promise<void>((resolve, reject) => {
        let out = "";
        proc.stdout!.on("data", (d: Buffer) => (out += d.toString()).includes('"msg":"listening"') && resolve());
        proc.on("exit", (code) => reject(new Error(`exited with ${code}: ${out}`)));
      });
      const res = await fetch(`http://127.0.0.1:${httpPort}/healthcheck`);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("OK");
    } finally {
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGTERM");
      expect(await exited).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
