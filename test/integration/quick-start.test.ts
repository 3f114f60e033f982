// The README's first screen, as a newcomer follows it: the two commands, the ports it names, and its one request
// sent to `npm start`'s sluice (the shipped rules, the memory store) with the answer it shows.
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSettings } from "../../src/settings/settings.js";
import { rlsClient, type RlsClient, type WireRequest } from "../helpers/grpc-client.js";
import { inOneMinute } from "../helpers/minute.js";
import { ROOT, startSluice, type SluiceProcess } from "../helpers/sluice.js";

const readme = fs.readFileSync(path.join(ROOT, "README.md"), "utf8");
const firstScreen = readme.slice(0, readme.indexOf("\n## "));
const CODE_NAMES = ["UNKNOWN", "OK", "OVER_LIMIT"];
const UNIT_NAMES = ["UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR", "WEEK"];

/** The fenced blocks of the first screen whose info string is `lang`. */
function blocks(lang: string): string[] {
  return [...firstScreen.matchAll(new RegExp("```" + lang + "\\n([\\s\\S]*?)```", "g"))].map((m) => m[1]);
}

describe("the README's first screen", () => {
  it("starts with the two commands a newcomer needs", () => {
    const commands = blocks("sh")[0]
      .split("\n")
      .filter(Boolean)
      .map((l) => l.split("#")[0].trim());
    expect(commands).toEqual(["npm install && npm start", "npm test"]);
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
    expect(pkg.scripts.start).toMatch(/ dist\/bin\.js serve$/);
    expect(pkg.bin.sluice).toBe("dist/bin.js");
  });

  it("names both ports as `npm start` opens them", () => {
    const defaults = serveSettings([], {});
    expect(firstScreen).toContain(`| ${defaults.port}, every address | gRPC`);
    expect(defaults.host).toBe("0.0.0.0");
    expect(firstScreen).toContain(`| ${defaults.adminPort}, ${defaults.adminHost} only | admin HTTP`);
  });

  describe("its one request, sent to the shipped rules", () => {
    let sluice: SluiceProcess;
    let client: RlsClient;
    beforeAll(async () => {
      // What `npm start` serves (config/, no --redis), on free ports.
      sluice = await startSluice([]);
      client = rlsClient(sluice.port);
    });
    afterAll(async () => {
      client?.close();
      await sluice?.stop();
    });

    it("gets the answer the README shows (grpcurl's JSON), and the call after the limit in the minute is refused", async () => {
      const grpcurl = blocks("sh")[1];
      expect(grpcurl).toContain("-proto envoy/service/ratelimit/v3/rls.proto");
      expect(fs.existsSync(path.join(ROOT, "protos/envoy/service/ratelimit/v3/rls.proto"))).toBe(true);
      expect(grpcurl).toContain("envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit");
      const request: WireRequest = JSON.parse(/-d '([^']+)'/.exec(grpcurl)![1]);
      const shown = JSON.parse(blocks("json")[0]);

      const limit = shown.statuses[0].currentLimit.requestsPerUnit as number;
      // The shown call and the next `limit` ones, all in one minute (one fixed window).
      const answers = await inOneMinute(10, async () => {
        const all = [];
        for (let i = 0; i <= limit; i++) all.push(await client.shouldRateLimit(request));
        return all;
      });
      const s = answers[0].statuses[0];
      const asGrpcurl = {
        overallCode: CODE_NAMES[answers[0].overall_code],
        statuses: [
          {
            code: CODE_NAMES[Number(s.code)],
            currentLimit: { name: s.current_limit?.name, requestsPerUnit: s.current_limit?.requests_per_unit, unit: UNIT_NAMES[s.current_limit?.unit ?? 0] },
            limitRemaining: s.limit_remaining,
            durationUntilReset: `${s.duration_until_reset?.seconds ?? 0}s`,
          },
        ],
      };
      // The time to the minute's end is whatever it is now; everything else exactly as shown.
      expect(asGrpcurl.statuses[0].durationUntilReset).toMatch(/^\d+s$/);
      asGrpcurl.statuses[0].durationUntilReset = shown.statuses[0].durationUntilReset;
      expect(asGrpcurl).toEqual(shown);
      // "The 121st such call within the minute answers OVER_LIMIT".
      expect(answers.map((a) => CODE_NAMES[a.overall_code])).toEqual([...Array(limit).fill("OK"), "OVER_LIMIT"]);
    });
  });
});
