// The gRPC service Envoy's rate-limit filter calls: named by the transport, health and tracing.
export const RLS_SERVICE = "envoy.service.ratelimit.v3.RateLimitService";
