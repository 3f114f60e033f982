// Where the envoyproxy/ratelimit compatibility fixtures are: SLUICE_COMPAT_DIR, else the shared folder
// beside this checkout, else the workplace's copy (a clone elsewhere, e.g. CI's, still finds them).
import fs from "node:fs";
import path from "node:path";
import { ROOT } from "./sluice.js";

export const COMPAT_DIR =
  process.env.SLUICE_COMPAT_DIR ??
  [path.resolve(ROOT, "../shared/compat/envoyproxy-ratelimit"), "/work/shared/compat/envoyproxy-ratelimit"].find((d) => fs.existsSync(d)) ??
  "/work/shared/compat/envoyproxy-ratelimit";
