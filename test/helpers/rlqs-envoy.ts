// A small Envoy config with the rate_limit_quota filter (RLQS) calling the "sluice" cluster: every request
// goes to one bucket, named by the x-bucket header's value under key `name` (or the fixed `bucket` when given).
// Assignment fallbacks deny by default, so Envoy admits only what sluice leased (docs/rlqs.md).
import { freePort } from "./ports.js";

type Obj = Record<string, any>;

const TYPE_HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const TYPE_RLQS = "type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig";
const TYPE_SETTINGS = "type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings";
const TYPE_ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
const TYPE_HTTP_OPTIONS = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
const TYPE_HEADER_INPUT = "type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput";

export interface RlqsEnvoyOptions {
  sluicePorts: number[];
  appPort: number;
  listenerPort?: number;
  domain?: string;
  /** A fixed bucket id; default {name: <the x-bucket header>}. */
  bucket?: Record<string, string>;
  /** Envoy's reporting_interval, e.g. "1s". */
  reportingInterval?: string;
  /** Before the first assignment and after one expires: DENY_ALL unless "allow". */
  fallback?: "allow" | "deny";
}

export async function rlqsEnvoyConfig(o: RlqsEnvoyOptions): Promise<{ config: Obj; listenerPort: number }> {
  const listenerPort = o.listenerPort ?? (await freePort());
  const endpoints = (ports: number[]) => [
    { lb_endpoints: ports.map((port) => ({ endpoint: { address: { socket_address: { address: "127.0.0.1", port_value: port } } } })) },
  ];
  const h2 = { [TYPE_HTTP_OPTIONS.split("/")[1]]: { "@type": TYPE_HTTP_OPTIONS, explicit_http_config: { http2_protocol_options: {} } } };
  const rule = { blanket_rule: o.fallback === "allow" ? "ALLOW_ALL" : "DENY_ALL" };
  const idBuilder = o.bucket
    ? Object.fromEntries(Object.entries(o.bucket).map(([k, v]) => [k, { string_value: v }]))
    : { name: { custom_value: { name: "x-bucket", typed_config: { "@type": TYPE_HEADER_INPUT, header_name: "x-bucket" } } } };
  const settings = {
    "@type": TYPE_SETTINGS,
    bucket_id_builder: { bucket_id_builder: idBuilder },
    reporting_interval: o.reportingInterval ?? "1s",
    no_assignment_behavior: { fallback_rate_limit: rule },
    expired_assignment_behavior: { fallback_rate_limit: rule },
  };
  const config: Obj = {
    static_resources: {
      listeners: [
        {
          name: "edge",
          address: { socket_address: { address: "127.0.0.1", port_value: listenerPort } },
          filter_chains: [
            {
              filters: [
                {
                  name: "envoy.filters.network.http_connection_manager",
                  typed_config: {
                    "@type": TYPE_HCM,
                    stat_prefix: "edge",
                    route_config: {
                      name: "edge",
                      virtual_hosts: [{ name: "app", domains: ["*"], routes: [{ match: { prefix: "/" }, route: { cluster: "app" } }] }],
                    },
                    http_filters: [
                      {
                        name: "envoy.filters.http.rate_limit_quota",
                        typed_config: {
                          "@type": TYPE_RLQS,
                          rlqs_server: { envoy_grpc: { cluster_name: "sluice" } },
                          domain: o.domain ?? "edge",
                          bucket_matchers: { on_no_match: { action: { name: "rate_limit_quota", typed_config: settings } } },
                        },
                      },
                      { name: "envoy.filters.http.router", typed_config: { "@type": TYPE_ROUTER } },
                    ],
                  },
                },
              ],
            },
          ],
        },
      ],
      clusters: [
        {
          name: "sluice",
          type: "STATIC",
          connect_timeout: "1s",
          lb_policy: "ROUND_ROBIN",
          typed_extension_protocol_options: h2,
          load_assignment: { cluster_name: "sluice", endpoints: endpoints(o.sluicePorts) },
        },
        {
          name: "app",
          type: "STATIC",
          connect_timeout: "1s",
          lb_policy: "ROUND_ROBIN",
          load_assignment: { cluster_name: "app", endpoints: endpoints([o.appPort]) },
        },
      ],
    },
  };
  return { config, listenerPort };
}
