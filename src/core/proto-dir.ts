// Where protos/ is: its own module, so that naming it loads no protobuf library.
import path from "node:path";
import { fileURLToPath } from "node:url";

export const PROTO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../protos");
