// Loads the wire contract from protos/ (protobufjs via proto-loader; google-protobuf codegen can't be installed here).
import * as protoLoader from "@grpc/proto-loader";
import type * as grpc from "@grpc/grpc-js";
import { PROTO_DIR } from "./proto-dir.js";

export { PROTO_DIR };

export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: Number,
  defaults: false,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

export interface LoadedProtos {
  rls: grpc.ServiceDefinition;
  health: grpc.ServiceDefinition;
}

export function loadProtos(): LoadedProtos {
  const def = protoLoader.loadSync(["envoy/service/ratelimit/v3/rls.proto", "grpc/health/v1/health.proto"], LOADER_OPTIONS);
  return {
    rls: def["envoy.service.ratelimit.v3.RateLimitService"] as grpc.ServiceDefinition,
    health: def["grpc.health.v1.Health"] as grpc.ServiceDefinition,
  };
}
