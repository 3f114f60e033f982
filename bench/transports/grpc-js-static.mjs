// Bake-off candidate "grpc-js-static": sluice's grpc-js transport (dist/server/grpc.js) as it is, with
// protobufjs static code (pbjs -t static-module, generated/rls-static.cjs) as its (de)serializers
// instead of proto-loader's. proto-loader decodes and then converts to a plain object (toObject), and
// converts (fromObject) before encoding; static code decodes into its message classes (defaults on
// their prototypes) and encodes sluice's wire objects as they are: the same bytes, as their field names
// are the proto's, like proto-loader's with keepCase.
//
// How: grpc.js starts its server as always; then each registered method's serialize/deserialize is
// replaced in grpc-js's method registry (Server.handlers, which grpc-js reads on every call). The wire
// guard stays in front of decoding with the same bounds (refusals are wire-guard.js's RejectedRequest,
// which grpc.js answers INVALID_ARGUMENT). Everything else (gate, keepalive, health, TLS, shutdown) is
// grpc.js's own, so the two candidates differ only in (de)serialization.
import { createRequire } from "node:module";
import { startGrpcServer } from "../../dist/server/grpc.js";
import { RLS_SERVICE } from "../../dist/server/transport.js";
import { checkRequestWire, RejectedRequest } from "../../dist/server/wire-guard.js";
import { STATIC_MODULE } from "./generate.mjs";

export const name = "grpc-js-static";

const require = createRequire(import.meta.url);
let root;
try {
  root = require(STATIC_MODULE);
} catch (err) {
  throw new Error(`${STATIC_MODULE} does not load (${err.message}): run node bench/transports/generate.mjs`);
}
const { util } = require("protobufjs/minimal");
const RLS = root.envoy.service.ratelimit.v3;
const HEALTH = root.grpc.health.v1;

/** A uint64 that protobufjs decoded as a Long becomes a Number, as proto-loader's `longs: Number` gives. */
function decodeRateLimitRequest(buf) {
  const m = RLS.RateLimitRequest.decode(buf);
  const ds = m.descriptors;
  for (let i = 0; i < ds.length; i++) {
    const h = ds[i].hits_addend;
    if (h && typeof h.value === "object" && h.value !== null) h.value = util.LongBits.from(h.value).toNumber(true);
  }
  return m;
}

const encode = (type) => (message) => type.encode(message).finish();

function codecs(bounds) {
  const health = { serialize: encode(HEALTH.HealthCheckResponse), deserialize: (buf) => HEALTH.HealthCheckRequest.decode(buf) };
  return {
    [`/${RLS_SERVICE}/ShouldRateLimit`]: {
      serialize: encode(RLS.RateLimitResponse),
      // As grpc.ts's guardDecoding: the wire guard first; a decoder error is a refusal, not a throw.
      deserialize(buf) {
        const refused = checkRequestWire(buf, bounds);
        if (refused) return new RejectedRequest(refused);
        try {
          return decodeRateLimitRequest(buf);
        } catch (err) {
          return new RejectedRequest(`malformed request: ${err.message}`);
        }
      },
    },
    "/grpc.health.v1.Health/Check": health,
    "/grpc.health.v1.Health/Watch": health,
  };
}

/** @type {import("../../dist/server/transport.js").StartTransport} */
export async function start(limiter, o) {
  const running = await startGrpcServer(limiter, o);
  const handlers = running.server.handlers;
  const swap = codecs(o.bounds);
  const missing = Object.keys(swap).filter((path) => !handlers?.get?.(path)?.deserialize);
  if (missing.length) {
    await running.shutdown(0);
    throw new Error(`grpc-js's method registry (Server.handlers) has no ${missing.join(", ")}: grpc-js changed, update ${import.meta.url}`);
  }
  for (const [path, c] of Object.entries(swap)) Object.assign(handlers.get(path), c);
  return running;
}
