// SLUICE_TRANSPORT chose between two gRPC servers; there is one now (server/grpc/h2/). A start that still sets
// it is refused with a usage error naming the variable, so a pin to grpc-js is not silently served by h2.
import { describe, expect, it } from "vitest";
import { serveSettings, UsageError } from "../../src/settings/settings.js";

const GONE = "SLUICE_TRANSPORT was removed (got 'X'): sluice has one gRPC server, its own on node:http2 (the former default, h2); unset SLUICE_TRANSPORT";

describe("SLUICE_TRANSPORT", () => {
  it("set to any value: a usage error that says it is gone and why", () => {
    for (const value of ["grpc-js", "h2", "nope"]) {
      expect(() => serveSettings([], { SLUICE_TRANSPORT: value })).toThrow(UsageError);
      expect(() => serveSettings([], { SLUICE_TRANSPORT: value })).toThrow(GONE.replace("'X'", `'${value}'`));
    }
  });

  it("unset or empty: no error", () => {
    expect(() => serveSettings([], {})).not.toThrow();
    expect(() => serveSettings([], { SLUICE_TRANSPORT: "" })).not.toThrow();
  });
});
