// deploy/kubernetes against the Kubernetes API schemas and against sluice itself: every object validates
// (test/helpers/k8s-schema.ts), and what one object names in another (labels, ports, the ConfigMap, the Redis
// Service) or in sluice (settings, admin paths, rule files) is there. Values come from the sources: sluice's
// settings parser, the flag table of docs/configuration.md, the Dockerfile, config/ and envoy/envoy.yaml.
import { readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { healthRoutes } from "../../src/server/admin/admin.js";
import { serveSettings, UsageError } from "../../src/settings/settings.js";
import {
  adminPaths,
  documentedVariables,
  imageEnv,
  KUBERNETES_DIR,
  KUSTOMIZATIONS,
  kustomizationResources,
  manifestFiles,
  manifestObjects,
  read,
  type K8sObject,
} from "../helpers/deploy-files.js";
import { EnvoyEdge } from "../helpers/envoy-actions.js";
import { schemaProblems } from "../helpers/k8s-schema.js";
import { ROOT } from "../helpers/sluice.js";

const objects = manifestFiles().flatMap((file) => manifestObjects(file).map((object) => ({ file, object })));

function one(kind: string, name: string): K8sObject {
  const found = objects.filter((o) => o.object.kind === kind && o.object.metadata.name === name);
  expect(found.length, `${kind} ${name}`).toBe(1);
  return found[0].object;
}

const deployment = one("Deployment", "sluice");
const pod = deployment.spec.template.spec;
const container = pod.containers.find((c: any) => c.name === "sluice");
const service = one("Service", "sluice");
const headless = one("Service", "sluice-headless");
const networkPolicy = one("NetworkPolicy", "sluice");
const redisDeployment = one("Deployment", "sluice-redis-demo");
const redisService = one("Service", "sluice-redis-demo");

/** The container's environment as sluice sees it in the pod: the image's ENV, then the manifest's. */
function podEnv(c: any): Record<string, string> {
  const env = { ...imageEnv() };
  for (const e of c.env ?? []) env[e.name] = e.value;
  return env;
}
const settings = serveSettings([], podEnv(container));

/** Does `selector` (matchLabels) pick an object with `labels`? */
const selects = (selector: Record<string, string>, labels: Record<string, string> = {}) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

function containerPort(c: any, name: string): number {
  const p = (c.ports ?? []).find((p: any) => p.name === name);
  expect(p, `container port ${name}`).toBeDefined();
  return p.containerPort;
}

/** Kubernetes quantities as numbers: cores or bytes. */
function quantity(q: string | number): number {
  const m = /^(\d+(?:\.\d+)?)(m|Ki|Mi|Gi)?$/.exec(String(q));
  if (!m) throw new Error(`quantity ${q}`);
  const scale: Record<string, number> = { m: 1e-3, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 };
  return Number(m[1]) * (m[2] ? scale[m[2]] : 1);
}

describe("deploy/kubernetes: the API schemas", () => {
  it("the kustomizations list every manifest file in their directories, and only files that exist", () => {
    const listed = KUSTOMIZATIONS.flatMap(kustomizationResources).sort();
    expect(listed).toEqual(manifestFiles().sort());
  });

  it("has the objects the deployment needs", () => {
    const kinds = objects.map((o) => `${o.object.apiVersion} ${o.object.kind} ${o.object.metadata.name}`).sort();
    expect(kinds).toEqual([
      "apps/v1 Deployment sluice",
      "apps/v1 Deployment sluice-redis-demo",
      "autoscaling/v2 HorizontalPodAutoscaler sluice",
      "monitoring.coreos.com/v1 ServiceMonitor sluice",
      "networking.k8s.io/v1 NetworkPolicy sluice",
      "policy/v1 PodDisruptionBudget sluice",
      "v1 ConfigMap sluice-rules",
      "v1 Service sluice",
      "v1 Service sluice-headless",
      "v1 Service sluice-redis-demo",
    ]);
  });

  it.each(objects.map((o) => [`${o.file}: ${o.object.kind} ${o.object.metadata.name}`, o.object]))("%s validates", async (_name, object) => {
    expect(await schemaProblems(object)).toEqual([]);
  });

  it("the schema check refuses a wrong type, a missing required field, a bad enum value and an unknown field", async () => {
    const broken = (edit: (d: any) => void) => {
      const d = structuredClone(deployment);
      edit(d.spec.template.spec.containers[0]);
      return schemaProblems(d);
    };
    expect(await broken((c) => (c.ports[0].containerPort = "8081"))).toEqual(["data/spec/template/spec/containers/0/ports/0/containerPort must be integer"]);
    expect(await broken((c) => delete c.readinessProbe.httpGet.port)).toEqual([
      "data/spec/template/spec/containers/0/readinessProbe/httpGet must have required property port",
    ]);
    expect((await broken((c) => (c.readinessProbe.httpGet.scheme = "GRPC")))[0]).toMatch(
      /^data\/spec\/template\/spec\/containers\/0\/readinessProbe\/httpGet\/scheme must be equal to one of the allowed values/,
    );
    expect(await broken((c) => (c.readinessProbe.httpGet.paht = c.readinessProbe.httpGet.path))).toEqual([
      "data/spec/template/spec/containers/0/readinessProbe/httpGet/paht is not a field of apps/v1 Deployment",
    ]);
    expect(
      await schemaProblems({
        apiVersion: "monitoring.coreos.com/v1",
        kind: "ServiceMonitor",
        metadata: { name: "x" },
        spec: { selector: {}, endpoints: [{ port: 8080 }] },
      }),
    ).toEqual(["data/spec/endpoints/0/port must be string"]);
  });

  it("names and labels are what the API server accepts (DNS-1123 names, label syntax, IANA port names)", () => {
    const dns1123 = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
    const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;
    const labelKey = /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
    const portName = /^(?=.*[a-z])[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$/;
    for (const { object } of objects) {
      expect(object.metadata.name).toMatch(dns1123);
      for (const [k, v] of Object.entries(object.metadata.labels ?? {})) {
        expect(k).toMatch(labelKey);
        expect(v).toMatch(labelValue);
      }
    }
    for (const c of [container, ...redisDeployment.spec.template.spec.containers]) for (const p of c.ports) expect(p.name).toMatch(portName);
    for (const s of [service, redisService]) for (const p of s.spec.ports) expect(p.name).toMatch(portName);
  });
});

describe("deploy/kubernetes: sluice's Deployment against sluice", () => {
  it("sets only variables sluice reads (the flag table of docs/configuration.md, which docs-configuration.test.ts holds to the code)", () => {
    const known = documentedVariables();
    for (const e of container.env) expect(known, e.name).toContain(e.name);
  });

  it("its environment is valid settings: gRPC and admin ports as the container declares them, admin on every address", () => {
    expect(containerPort(container, "grpc")).toBe(settings.port);
    expect(containerPort(container, "admin")).toBe(settings.adminPort);
    expect(settings.adminHost).toBe("0.0.0.0");
    expect(settings.workers).toBe(1);
  });

  it("probes the admin port: liveness and startup on /healthz, readiness on /readyz (sluice's own health routes)", () => {
    const routes = Object.keys(healthRoutes(() => ({ ready: true })));
    const probes = { startupProbe: "/healthz", livenessProbe: "/healthz", readinessProbe: "/readyz" } as const;
    for (const [probe, expected] of Object.entries(probes)) {
      const get = container[probe].httpGet;
      expect(get.path, probe).toBe(expected);
      expect(routes).toContain(get.path);
      expect(containerPort(container, get.port), probe).toBe(settings.adminPort);
    }
  });

  it("reads its rules from the ConfigMap, mounted as a whole directory (so its updates arrive) at SLUICE_CONFIG", () => {
    const volume = pod.volumes.find((v: any) => v.configMap?.name === "sluice-rules");
    const mount = container.volumeMounts.find((m: any) => m.name === volume.name);
    expect(mount.mountPath).toBe(settings.configDir);
    expect(mount.subPath).toBeUndefined();
    expect(mount.readOnly).toBe(true);
  });

  it("the ConfigMap holds config/ as shipped, file for file", () => {
    const rules = one("ConfigMap", "sluice-rules");
    const shipped = readdirSync(path.join(ROOT, "config")).filter((f) => /\.ya?ml$/.test(f));
    expect(Object.keys(rules.data).sort()).toEqual(shipped.sort());
    for (const f of shipped) expect(rules.data[f], f).toBe(read(`config/${f}`));
  });

  it("counts in the demo Redis through its Service", () => {
    expect(settings.redisUrls.length).toBe(1);
    const url = new URL(settings.redisUrls[0]);
    expect(url.hostname).toBe(redisService.metadata.name);
    const port = redisService.spec.ports.find((p: any) => p.port === Number(url.port));
    expect(port, `Service ${redisService.metadata.name} port ${url.port}`).toBeDefined();
    const redisContainer = redisDeployment.spec.template.spec.containers[0];
    expect(containerPort(redisContainer, port.targetPort)).toBe(port.port);
    expect(selects(redisService.spec.selector, redisDeployment.spec.template.metadata.labels)).toBe(true);
  });

  it("the demo Redis says it is one, and runs the Redis version docker-compose.yml runs", () => {
    const file = objects.find((o) => o.object === redisDeployment)!.file;
    expect(read(file)).toMatch(/^# DEMO ONLY:/);
    expect(redisDeployment.metadata.labels?.["app.kubernetes.io/part-of"]).toBe("sluice-demo");
    expect(redisDeployment.spec.template.spec.containers[0].image).toBe(parse(read("docker-compose.yml")).services.redis.image);
  });

  it("runs the image of this version, as a non-root user, on a read-only root filesystem, without privileges", () => {
    expect(container.image).toBe(`sluice:${JSON.parse(read("package.json")).version}`);
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
    expect(pod.securityContext.seccompProfile.type).toBe("RuntimeDefault");
    expect(container.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } });
    expect(pod.automountServiceAccountToken).toBe(false);
  });

  it("turns Service links off: the Service named sluice would set SLUICE_PORT to tcp://IP:PORT, which sluice refuses", () => {
    expect(pod.enableServiceLinks).toBe(false);
    const link = `tcp://10.0.0.1:${service.spec.ports[0].port}`;
    const name = `${service.metadata.name.toUpperCase()}_PORT`;
    expect(() => serveSettings([], { ...podEnv({ env: container.env.filter((e: any) => e.name !== name) }), [name]: link })).toThrow(UsageError);
  });

  it("requests CPU and memory; limits memory only: no CPU limit to throttle a latency-critical process", () => {
    const { requests, limits } = container.resources;
    expect(Object.keys(requests).sort()).toEqual(["cpu", "memory"]);
    expect(Object.keys(limits)).toEqual(["memory"]);
    expect(quantity(requests.memory)).toBeLessThanOrEqual(quantity(limits.memory));
  });

  it("gives SIGTERM time for the preStop pause, SLUICE_DRAIN_DELAY_MS, SLUICE_SHUTDOWN_GRACE_MS and closing the store and statsd", () => {
    const pause = container.lifecycle.preStop.exec.command;
    expect(pause[0]).toBe("sleep");
    // serve's own bounds on the last two steps of shutdown.
    const main = read("src/cli/serve-build.ts");
    const bound = (name: string) => Number(new RegExp(`const ${name} = ([\\d_]+);`).exec(main)![1].replace(/_/g, ""));
    const needed = Number(pause[1]) * 1000 + settings.drainDelayMs + settings.shutdownGraceMs + bound("STORE_CLOSE_MS") + bound("STATSD_CLOSE_MS");
    expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(needed);
  });
});

describe("deploy/kubernetes: the objects around the Deployment", () => {
  const podLabels = deployment.spec.template.metadata.labels;

  it("the Deployment's selectors pick its own pods and not the demo Redis's", () => {
    expect(selects(deployment.spec.selector.matchLabels, podLabels)).toBe(true);
    expect(selects(deployment.spec.selector.matchLabels, redisDeployment.spec.template.metadata.labels)).toBe(false);
    for (const t of pod.topologySpreadConstraints) expect(selects(t.labelSelector.matchLabels, podLabels)).toBe(true);
  });

  it("the Service sends gRPC and admin to the named container ports, on sluice's ports, gRPC marked as such", () => {
    expect(selects(service.spec.selector, podLabels)).toBe(true);
    expect(selects(service.spec.selector, redisDeployment.spec.template.metadata.labels)).toBe(false);
    const byName = Object.fromEntries(service.spec.ports.map((p: any) => [p.name, p]));
    expect(Object.keys(byName).sort()).toEqual(["admin", "grpc"]);
    for (const p of service.spec.ports) expect(containerPort(container, p.targetPort), p.name).toBe(p.port);
    expect(byName.grpc.port).toBe(settings.port);
    expect(byName.grpc.appProtocol).toBe("grpc");
    expect(byName.admin.port).toBe(settings.adminPort);
  });

  it("a headless Service beside it names every pod's gRPC port (DNS per pod), with the same pods and port", () => {
    expect(headless.spec.clusterIP).toBe("None");
    expect(headless.spec.selector).toEqual(service.spec.selector);
    expect(headless.spec.ports).toEqual([service.spec.ports.find((p: any) => p.name === "grpc")]);
    // The ServiceMonitor (which selects the ClusterIP Service by its labels) does not pick it: one scrape per pod.
    const monitor = one("ServiceMonitor", "sluice");
    expect(selects(monitor.spec.selector.matchLabels, headless.metadata.labels)).toBe(false);
  });

  it("envoy/envoy.yaml's sluice cluster asks the headless Service (one host per pod) on sluice's gRPC port", () => {
    const { address, port, cluster } = new EnvoyEdge().clusterAddress("sluice");
    expect(address).toBe(headless.metadata.name);
    expect(port).toBe(headless.spec.ports[0].port);
    expect(cluster.type).toBe("STRICT_DNS");
  });

  it("the NetworkPolicy opens gRPC to every client and the admin port to this namespace's pods and Prometheus only", () => {
    expect(selects(networkPolicy.spec.podSelector.matchLabels, podLabels)).toBe(true);
    expect(networkPolicy.spec.policyTypes).toEqual(["Ingress"]);
    const rules = networkPolicy.spec.ingress as any[];
    const byPort = (name: string) => rules.filter((r) => r.ports.some((p: any) => p.port === name));
    // Named ports: the container's.
    for (const r of rules) for (const p of r.ports) expect(containerPort(container, p.port)).toBeGreaterThan(0);
    expect(byPort("grpc").map((r) => r.from)).toEqual([undefined]);
    const [admin] = byPort("admin");
    expect(byPort("admin").length).toBe(1);
    // podSelector {} alone: any pod of the policy's own namespace; the other peer: Prometheus's pods in its namespace.
    expect(admin.from).toEqual([
      { podSelector: {} },
      {
        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } },
        podSelector: { matchLabels: { "app.kubernetes.io/name": "prometheus" } },
      },
    ]);
    expect(containerPort(container, "admin")).toBe(settings.adminPort);
  });

  it("the PodDisruptionBudget covers sluice's pods and lets one go at a time", () => {
    const pdb = one("PodDisruptionBudget", "sluice");
    expect(selects(pdb.spec.selector.matchLabels, podLabels)).toBe(true);
    expect(pdb.spec.maxUnavailable).toBe(1);
  });

  it("the HorizontalPodAutoscaler scales the Deployment (which leaves replicas to it) from two replicas, on CPU", () => {
    const hpa = one("HorizontalPodAutoscaler", "sluice");
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: deployment.apiVersion, kind: "Deployment", name: deployment.metadata.name });
    expect(deployment.spec.replicas).toBeUndefined();
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    expect(hpa.spec.maxReplicas).toBeGreaterThan(hpa.spec.minReplicas);
    expect(hpa.spec.metrics.map((m: any) => m.resource.name)).toEqual(["cpu"]);
    expect(container.resources.requests.cpu).toBeDefined(); // utilization is measured against the request
  });

  it("the ServiceMonitor scrapes the Service's admin port at sluice's /metrics", () => {
    const monitor = one("ServiceMonitor", "sluice");
    expect(selects(monitor.spec.selector.matchLabels, service.metadata.labels)).toBe(true);
    expect(monitor.spec.endpoints.length).toBe(1);
    const [endpoint] = monitor.spec.endpoints;
    expect(service.spec.ports.find((p: any) => p.name === endpoint.port)?.port).toBe(settings.adminPort);
    expect(endpoint.path).toBe("/metrics");
    expect(adminPaths()).toContain(endpoint.path);
  });

  it(`${KUBERNETES_DIR}/kustomization.yaml leaves the ServiceMonitor to monitoring/ (it needs the operator's CRDs)`, () => {
    const main = kustomizationResources(KUBERNETES_DIR);
    const monitors = objects.filter((o) => o.object.kind === "ServiceMonitor").map((o) => o.file);
    for (const f of monitors) expect(main).not.toContain(f);
  });
});
