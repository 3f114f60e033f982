// The /ui page in a real headless Chromium (Debian's `chromium`, driven by puppeteer-core): it loads under
// its Content-Security-Policy with no violation, shows the shipped rules, and shows a refusal within seconds
// of it happening; the policy refuses to let it be framed. Waits poll the DOM.
import path from "node:path";
import type { Browser } from "puppeteer-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, watchedPage } from "../helpers/browser.js";
import { OVER_LIMIT, rlsClient, type RlsClient } from "../helpers/grpc-client.js";
import { ROOT, startSluice, type SluiceProcess } from "../helpers/sluice.js";

describe("/ui in headless Chromium", () => {
  let sluice: SluiceProcess;
  let client: RlsClient;
  let browser: Browser;

  beforeAll(async () => {
    sluice = await startSluice(["--config", path.join(ROOT, "config")]);
    client = rlsClient(sluice.port);
    browser = await launchBrowser();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    client?.close();
    await sluice?.stop();
  });

  it("shows the shipped rules, then a refusal seconds after it happens", async () => {
    const { page, errors, violations } = await watchedPage(browser);
    // Nothing but the admin port is fetched.
    const origins = new Set<string>();
    page.on("request", (r) => origins.add(new URL(r.url()).origin));
    const res = await page.goto(`http://127.0.0.1:${sluice.adminPort}/ui`);
    expect(res?.headers()["content-security-policy"]).toMatch(/^default-src 'none'; script-src 'sha256-[^']+'; style-src 'sha256-[^']+'; connect-src 'self';/);
    // Its style applies (the hash matches): the chosen-row colour is the stylesheet's.
    expect(await page.$eval("body", (b) => getComputedStyle(b).marginLeft)).toBe("21px");
    await page.waitForFunction(() => document.querySelectorAll("#rules tbody tr").length > 0, { polling: 50, timeout: 10_000 });
    const paths = await page.$$eval("#rules tbody tr", (rows) => rows.map((r) => (r as HTMLElement).dataset.path));
    expect(paths).toContain("edge.remote_address");
    expect(paths).toContain("edge.api_key");
    expect(await page.$eval("#refusals tbody", (b) => b.children.length)).toBe(0);

    // 120 a minute per IP, a token bucket (one back every 500 ms): one call takes all 120 at once, so the next is
    // refused however slowly a busy host runs 121 calls one by one.
    const entries = [{ key: "remote_address", value: "198.51.100.9" }];
    expect((await client.shouldRateLimit({ domain: "edge", descriptors: [{ entries, hits_addend: { value: 120 } }] })).overall_code).not.toBe(OVER_LIMIT);
    expect((await client.shouldRateLimit({ domain: "edge", descriptors: [{ entries }] })).overall_code).toBe(OVER_LIMIT);
    const refusedAt = Date.now();
    await page.waitForFunction(
      () => {
        const row = document.querySelector('#refusals tr[data-rule="edge.remote_address"]');
        return row?.querySelector(".refused-count")?.textContent === "1" && row.querySelector(".clients-count")?.textContent === "1";
      },
      { polling: 50, timeout: 10_000 },
    );
    expect(Date.now() - refusedAt).toBeLessThan(10_000);
    // The most refused client of the chosen (first) rule.
    await page.waitForFunction(() => document.querySelector("#top tbody td")?.textContent === "remote_address=198.51.100.9", { polling: 50, timeout: 5000 });

    // The explain form answers from the rules in force.
    await page.click("#explain button");
    await page.waitForFunction(() => (document.getElementById("explained")?.textContent ?? "").includes("edge.remote_address"), { polling: 50, timeout: 5000 });
    expect(errors).toEqual([]);
    expect(await violations()).toEqual([]);
    expect([...origins]).toEqual([`http://127.0.0.1:${sluice.adminPort}`]);
  }, 60_000);

  it("refuses to be framed by another page (frame-ancestors 'none')", async () => {
    const page = await browser.newPage();
    await page.setContent(`<iframe id="f" src="http://127.0.0.1:${sluice.adminPort}/ui"></iframe>`);
    // setContent waits for the frame's load: Chromium puts its own error document in place of the page.
    const frame = page.frames().find((f) => f !== page.mainFrame());
    const title = await frame?.evaluate(() => document.title).catch(() => "(no access)");
    expect(title).not.toBe("sluice: who is being limited");
  }, 30_000);
});
