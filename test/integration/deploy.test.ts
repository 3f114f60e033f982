// What can be checked of the Docker side without a Docker engine: the files parse, point at each other
// (service names, ports, mounted paths), pin their images, and the image gets what sluice reads at run time.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { serveSettings } from "../../src/settings.js";
import { EnvoyEdge } from "../helpers/envoy-actions.js";
import { freePort } from "../helpers/ports.js";
import { ROOT } from "../helpers/sluice.js";

const read = (f: string) => readFileSync(path.join(ROOT, f), "utf8");
const compose = parse(read("docker-compose.yml"));
const services = compose.services;
const edge = new EnvoyEdge();
const defaults = serveSettings([], {});

/** "./x:/y:ro" -> { host: "./x", container: "/y" } */
function mounts(service: { volumes?: string[] }) {
  return (service.volumes ?? []).map((v) => {
    const [host, container] = v.split(":");
    return { host, container };
  });
}

describe("docker-compose.yml", () => {
  it("has envoy, sluice, redis and the demo app, with every image pinned to a version", () => {
    expect(Object.keys(services).sort()).toEqual(["app", "envoy", "redis", "sluice"]);
    expect(services.sluice.build).toBe(".");
    for (const name of ["envoy", "redis", "app"]) {
      expect(services[name].image, name).toMatch(/^[\w./-]+:v?\d+\.\d+\.\d+(-[\w.]+)?$/);
    }
    expect(services.envoy.image).toMatch(/^envoyproxy\/envoy:v1\.\d+\.\d+$/);
  });

  it("envoy serves envoy/envoy.yaml on port 10000", () => {
    const config = services.envoy.command[services.envoy.command.indexOf("-c") + 1];
    expect(mounts(services.envoy)).toContainEqual({ host: "./envoy/envoy.yaml", container: config });
    expect(services.envoy.ports).toContain("10000:10000");
    expect(edge.raw.static_resources.listeners[0].address.socket_address.port_value).toBe(10000);
  });

  it("envoy's clusters reach the sluice and app services on the ports they listen on", () => {
    const sluice = edge.clusterAddress("sluice");
    expect(sluice.address).toBe("sluice");
    expect(sluice.port).toBe(Number(services.sluice.environment.SLUICE_PORT));
    expect(sluice.port).toBe(defaults.port);
    const app = edge.clusterAddress("app");
    expect(app.address).toBe("app");
    expect(app.port).toBe(Number(services.app.environment.PORT));
  });

  it("sluice reads the mounted ./config and counts in the redis service", () => {
    expect(mounts(services.sluice)).toContainEqual({ host: "./config", container: services.sluice.environment.SLUICE_CONFIG });
    expect(new URL(services.sluice.environment.SLUICE_REDIS).hostname).toBe("redis");
    expect(services.sluice.depends_on.redis.condition).toBe("service_healthy");
  });

  it("the demo app runs demo/upstream.mjs from the mounted ./demo", () => {
    const script = services.app.command.at(-1);
    const mount = mounts(services.app).find((m) => script.startsWith(m.container + "/"))!;
    expect(mount.host).toBe("./demo");
    expect(script.slice(mount.container.length)).toBe("/upstream.mjs");
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
    expect(options.explicit_http_config).toEqual({ http2_protocol_options: {} });
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
  const lines = read("Dockerfile").split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
  const stages = lines.reduce<string[][]>((acc, l) => (l.startsWith("FROM ") ? [...acc, [l]] : (acc.at(-1)!.push(l), acc)), []);
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
    const copied = final
      .filter((l) => l.startsWith("COPY "))
      .map((l) => l.split(/\s+/).at(-1)!.replace(/^\.\//, ""));
    for (const f of files) expect(copied, f).toContain(f);
    expect(final).toContain("COPY --from=build /app/dist ./dist");
  });

  it("runs `serve` as the non-root node user on sluice's port", () => {
    expect(final).toContain("USER node");
    expect(final).toContain(`EXPOSE ${defaults.port}`);
    expect(final.at(-1)).toBe('CMD ["node", "dist/main.js", "serve"]');
  });

  it(".dockerignore keeps local build state out of the context", () => {
    const ignored = read(".dockerignore").split("\n").map((l) => l.trim());
    for (const p of ["node_modules", "dist", ".git"]) expect(ignored).toContain(p);
  });
});

describe("demo/upstream.mjs", () => {
  it("answers 200 with a JSON echo", async () => {
    const port = await freePort();
    const proc = spawn(process.execPath, [path.join(ROOT, "demo/upstream.mjs")], { env: { ...process.env, PORT: String(port) }, stdio: ["ignore", "pipe", "inherit"] });
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
