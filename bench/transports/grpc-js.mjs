// Bake-off candidate "grpc-js": sluice's transport as shipped (src/server/grpc.ts: @grpc/grpc-js with
// proto-loader's (de)serializers, which convert through plain objects on every call).
export { startGrpcServer as start } from "../../dist/server/grpc.js";
export const name = "grpc-js";
