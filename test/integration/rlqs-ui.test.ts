// RLQS buckets where an operator looks, driven by a real RLQS stream (a gRPC client as Envoy's rate_limit_quota
// filter would write, no Envoy): /ui in a real headless Chromium lists each bucket in use with its demand, its
// assignment (a rate lease, a burst lease, DENY_ALL, ALLOW_ALL), the time to live it was sent with and what is left,
// under its Content-Security-Policy; and the denied requests usage reports carry count in /top as refusals of the
// bucket's limit, exactly as many as reported.
import type { Browser, Page } from "puppeteer-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, watchedPage } from "../helpers/browser.js";
import { rlqsClient, usage, type RlqsClient } from "../helpers/rlqs-client.js";
import { ruleDir, startSluice, type SluiceProcess } from "../helpers/sluice.js";
import { sleep, until } from "../helpers/wait.js";

// Token buckets (no window: a lease's time to live is its rule's sync interval, whatever the clock says).
// lim: 10 a second; a new bucket's first lease is a quarter of it: a rate lease of 2 a second for 5 s.
// few: 20 an hour; a rate lease for 10 s would take over half of it: a burst lease of what 1 a second spends in
//   10 s, 10 units (the next one, ~9.85 s later, is 10 units again: the bucket holds 20).
// zero: a limit of 0, DENY_ALL; late: the same, first reported with denied requests. name=free: no rule, ALLOW_ALL.
const RULES = `domain: q
descriptors:
  - key: name
    value: lim
    rate_limit: {unit: hour, requests_per_unit: 36000, algorithm: token_bucket, approximate: {sync_interval_ms: 5000}}
  - key: name
    value: few
    rate_limit: {unit: hour, requests_per_unit: 20, algorithm: token_bucket, approximate: {sync_interval_ms: 10000}}
  - key: name
    value: zero
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: name
    value: late
    rate_limit: {unit: hour, requests_per_unit: 0}
`;

interface Row {
  domain: string;
  bucket: string;
  demand: string;
  assignment: string;
  ttl: string;
  left: string;
}

/** The page's RLQS rows as shown, by bucket. */
async function rows(page: Page): Promise<Record<string, Row>> {
  return page.$$eval("#rlqs tbody tr", (trs) =>
    Object.fromEntries(
      trs.map((tr) => {
        const [domain, bucket, demand, assignment, ttl, left] = Array.from((tr as HTMLTableRowElement).cells).map((c) => c.textContent ?? "");
        return [bucket, { domain, bucket, demand, assignment, ttl, left }];
      }),
    ),
  );
}

/** Seconds left as the page shows them ("3.2 s"). */
const secondsLeft = (r: Row) => {
  expect(r.left).toMatch(/^\d+\.\d s$/);
  return Number(r.left.slice(0, -2));
};

describe("RLQS buckets in /ui (headless Chromium) and their denied requests in /top", () => {
  let sluice: SluiceProcess;
  let client: RlqsClient;
  let browser: Browser;

  beforeAll(async () => {
    sluice = await startSluice(["--config", ruleDir({ "q.yaml": RULES })]);
    client = rlqsClient(sluice.port);
    browser = await launchBrowser();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    client?.close();
    await sluice?.stop();
  });

  it("lists each bucket's assignment and its time to live, counts reported denials in /top, and empties when the stream ends", async () => {
    const admin = `http://127.0.0.1:${sluice.adminPort}`;
    const { page, errors, violations } = await watchedPage(browser);
    await page.goto(`${admin}/ui`);
    // Before any stream: no bucket, said so.
    await page.waitForFunction(
      () => document.getElementById("rlqs-none")?.hidden === false && document.querySelector("#status")?.textContent?.startsWith("updated"),
      {
        polling: 50,
        timeout: 10_000,
      },
    );
    expect(await page.$eval("#rlqs tbody", (b) => b.children.length)).toBe(0);
    expect(await (await fetch(`${admin}/rules?only=rlqs`)).json()).toEqual({});
    const bad = await fetch(`${admin}/rules?only=rules`);
    expect([bad.status, await bad.text()]).toEqual([400, "only takes rlqs (the RLQS buckets in use, without the rules)\n"]);

    const call = client.open();
    try {
      call.report("q", [usage({ name: "lim" }, 0), usage({ name: "few" }, 0), usage({ name: "zero" }, 0), usage({ name: "free" }, 0)]);
      await until(
        () => ["lim", "few", "zero", "free"].every((n) => call.seen[`name=${n}`]?.length > 0),
        10_000,
        () => `an answer for each bucket: ${JSON.stringify(call.seen)} ${call.ended ?? ""}`,
      );
      expect(call.seen["name=lim"][0]).toBe("tb 2");
      expect(call.seen["name=few"][0]).toBe("tb 10");
      await page.waitForFunction(() => document.querySelectorAll("#rlqs tbody tr").length === 4, { polling: 50, timeout: 10_000 });
      const shown = await rows(page);
      // Demand: none measured yet (a bucket's first report spans no time).
      const fixed = (r: Row) => [r.domain, r.demand, r.assignment, r.ttl];
      expect(fixed(shown["name=lim"])).toEqual(["q", "0", "lease 2/s", "5 s"]);
      expect(fixed(shown["name=few"])).toEqual(["q", "0", "lease 10 units", "10 s"]);
      expect(fixed(shown["name=zero"])).toEqual(["q", "0", "DENY_ALL", "2 s"]);
      expect(fixed(shown["name=free"])).toEqual(["q", "0", "ALLOW_ALL", "2 s"]);
      for (const [b, ttl] of [
        ["name=lim", 5],
        ["name=few", 10],
        ["name=zero", 2],
        ["name=free", 2],
      ] as const) {
        const left = secondsLeft(shown[b]);
        expect(left, b).toBeGreaterThan(0);
        expect(left, b).toBeLessThanOrEqual(ttl);
      }
      expect(await page.$eval("#rlqs-none", (p) => (p as HTMLElement).hidden)).toBe(true);

      // Denied requests: few's limit (a lease), zero's (a limit of 0) over two reports, late's in its bucket's first
      // report; free's (no rule) reach only the metric.
      await sleep(1000); // demand is measured over at least 400 ms
      call.report("q", [usage({ name: "few" }, 0, 1234), usage({ name: "zero" }, 0, 37), usage({ name: "free" }, 0, 9)]);
      call.report("q", [usage({ name: "zero" }, 0, 5), usage({ name: "late" }, 0, 7)]);
      const top = async () => (await (await fetch(`${admin}/top?n=5`)).json()).rules as { refused: number }[];
      let last: { refused: number }[] = [];
      await until(
        async () => (last = await top()).length === 3 && last.reduce((n, r) => n + r.refused, 0) === 1283,
        10_000,
        () => `1,283 refusals in /top: ${JSON.stringify(last)}`,
      );
      expect(await top()).toEqual([
        { domain: "q", rule: "q.name_few", limit: "20/HOUR", refused: 1234, refused_clients: 1, top: [{ client: "name=few", refused: 1234 }] },
        { domain: "q", rule: "q.name_zero", limit: "0/HOUR", refused: 42, refused_clients: 1, top: [{ client: "name=zero", refused: 42 }] },
        { domain: "q", rule: "q.name_late", limit: "0/HOUR", refused: 7, refused_clients: 1, top: [{ client: "name=late", refused: 7 }] },
      ]);
      const metrics = await (await fetch(`${admin}/metrics`)).text();
      expect(/^sluice_rlqs_denied_reported_total (\S+)$/m.exec(metrics)?.[1]).toBe("1292");
      // The page's refusals table shows the same counts.
      await page.waitForFunction(() => document.querySelector('#refusals tr[data-rule="q.name_zero"] .refused-count')?.textContent === "42", {
        polling: 50,
        timeout: 10_000,
      });
      expect(await page.$eval('#refusals tr[data-rule="q.name_few"] .refused-count', (c) => c.textContent)).toBe("1234");

      // zero's demand, now measured, as the data says it: the page shows the figure /rules?only=rlqs gives.
      const data = await (await fetch(`${admin}/rules?only=rlqs`)).json();
      expect(data.rlqs.buckets_total).toBe(5);
      const zero = data.rlqs.buckets.find((b: { bucket: { name: string } }) => b.bucket.name === "zero");
      expect(zero.demand).toBeGreaterThan(0);
      await page.waitForFunction(
        (d) => document.querySelector('#rlqs tr[data-bucket="name=zero"] .demand')?.textContent === d,
        { polling: 50, timeout: 5000 },
        String(zero.demand),
      );
      expect(call.ended).toBeUndefined();
    } finally {
      call.end();
    }
    // The stream ended: its buckets are gone from the page.
    await page.waitForFunction(() => document.getElementById("rlqs-none")?.hidden === false && document.querySelectorAll("#rlqs tbody tr").length === 0, {
      polling: 50,
      timeout: 10_000,
    });
    expect(errors).toEqual([]);
    expect(await violations()).toEqual([]);
  }, 60_000);
});
