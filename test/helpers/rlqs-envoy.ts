// A small Envoy config with the rate_limit_quota filter (RLQS) calling the "sluice" cluster: every request
// goes to one bucket, named by the x-bucket header's value under key `name` (or the fixed `bucket` when given).
// Assignment fallbacks deny by default, so Envoy admits only what sluice leased (docs/rlqs.md).
import { edgeListener, staticCluster } from "./envoy.js";
import { freePort } from "./ports.js";

type Obj = Record<string, any>;

const TYPE_RLQS = "type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig";
const TYPE_SETTINGS = "type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings";
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
  /**
   * Per x-bucket header value: fields merged over that bucket's settings (RateLimitQuotaBucketSettings), e.g.
   * another expired_assignment_behavior. Other values keep the default settings.
   */
  bucketSettings?: Record<string, Obj>;
}

export async function rlqsEnvoyConfig(o: RlqsEnvoyOptions): Promise<{ config: Obj; listenerPort: number }> {
  const listenerPort = o.listenerPort ?? (await freePort());
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
  const quotaFilter = {
    name: "envoy.filters.http.rate_limit_quota",
    typed_config: {
      "@type": TYPE_RLQS,
      rlqs_server: { envoy_grpc: { cluster_name: "sluice" } },
      domain: o.domain ?? "edge",
      bucket_matchers: {
        ...(o.bucketSettings && {
          matcher_list: {
            matchers: Object.entries(o.bucketSettings).map(([value, over]) => ({
              predicate: {
                single_predicate: {
                  input: { name: "x-bucket", typed_config: { "@type": TYPE_HEADER_INPUT, header_name: "x-bucket" } },
                  value_match: { exact: value },
                },
              },
              on_match: { action: { name: "rate_limit_quota", typed_config: { ...settings, ...over } } },
            })),
          },
        }),
        on_no_match: { action: { name: "rate_limit_quota", typed_config: settings } },
      },
    },
  };
  const config: Obj = {
    static_resources: {
      listeners: [edgeListener(listenerPort, { routes: [{ match: { prefix: "/" }, route: { cluster: "app" } }], httpFilters: [quotaFilter] })],
      clusters: [staticCluster("sluice", o.sluicePorts, { http2: true }), staticCluster("app", [o.appPort])],
    },
  };
  return { config, listenerPort };
}
